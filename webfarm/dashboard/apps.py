from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "webfarm.dashboard"
    label = "webfarm_dashboard"
    verbose_name = "Farm dashboard"

    def ready(self) -> None:
        from webfarm.dashboard import workers  # noqa: F401  (connects the worker heartbeat)
