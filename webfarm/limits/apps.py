from django.apps import AppConfig


class LimitsConfig(AppConfig):
    name = "webfarm.limits"
    label = "webfarm_limits"
    old_labels = ("limits",)
    verbose_name = "Farm-wide concurrency limits"
