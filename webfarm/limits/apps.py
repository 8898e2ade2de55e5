from django.apps import AppConfig


class LimitsConfig(AppConfig):
    name = "webfarm.limits"
    label = "webfarm_limits"
    verbose_name = "Farm-wide concurrency limits"
