from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = "Farm dashboard"

    def ready(self) -> None:
        from dashboard import workers  # noqa: F401  (connects the worker heartbeat)
