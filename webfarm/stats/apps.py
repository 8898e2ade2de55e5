from django.apps import AppConfig


class StatsConfig(AppConfig):
    name = "webfarm.stats"
    label = "webfarm_stats"
    verbose_name = "Farm-wide counters"

    def ready(self) -> None:
        from webfarm.stats import signals  # noqa: F401  (connects the receivers)
