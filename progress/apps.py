from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class ProgressConfig(AppConfig):
    name = "progress"
    verbose_name = "Job progress over memcached"

    def ready(self) -> None:
        from progress import checks, conf  # noqa: F401  (registers checks and signal receivers)

        # Every app's job types (`<app>/jobs.py`), on web nodes and workers alike.
        autodiscover_modules("jobs")
