from django.apps import AppConfig


class StatsConfig(AppConfig):
    name = "stats"
    verbose_name = "Farm-wide counters"

    def ready(self) -> None:
        from stats import signals  # noqa: F401  (connects the receivers)
