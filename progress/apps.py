from django.apps import AppConfig


class ProgressConfig(AppConfig):
    name = "progress"
    verbose_name = "Job progress over memcached"

    def ready(self) -> None:
        from progress import checks, conf  # noqa: F401  (registers checks and signal receivers)
