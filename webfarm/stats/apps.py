from django.apps import AppConfig

from webfarm.core import needs


class StatsConfig(AppConfig):
    name = "webfarm.stats"
    label = "webfarm_stats"
    verbose_name = "Farm-wide counters"

    def ready(self) -> None:
        needs.require(self)  # the apps it needs, named by a check where missing
        from webfarm.stats import signals  # noqa: F401  (connects the receivers)
