from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "webfarm.dashboard"
    label = "webfarm_dashboard"
    verbose_name = "Farm dashboard"

    def ready(self) -> None:
        # Registers the checks; connects the worker heartbeat.
        from webfarm.dashboard import checks, workers  # noqa: F401
