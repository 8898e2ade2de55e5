from django.apps import AppConfig

from webfarm.core import needs


class DashboardConfig(AppConfig):
    name = "webfarm.dashboard"
    label = "webfarm_dashboard"
    verbose_name = "Farm dashboard"

    def ready(self) -> None:
        needs.require(self)  # the apps it needs, named by a check where missing
        # Registers the checks; connects the worker heartbeat.
        from webfarm.dashboard import checks, workers  # noqa: F401
