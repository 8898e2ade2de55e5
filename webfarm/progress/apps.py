from django.apps import AppConfig
from django.urls import register_converter
from django.utils.module_loading import autodiscover_modules

from webfarm.core import needs
from webfarm.core.paths import hide_in_logs
from webfarm.progress.ids import ID_PATTERN, JobIdConverter


class ProgressConfig(AppConfig):
    name = "webfarm.progress"
    label = "webfarm_progress"
    verbose_name = "Job progress over memcached"

    def ready(self) -> None:
        needs.require(self)  # the apps it needs, named by a check where missing
        # A job's id in any app's URL patterns: <webfarm_job:job_id>.
        register_converter(JobIdConverter, "webfarm_job")
        # Registers checks and signal receivers (liveness: a worker's main process).
        from webfarm.progress import checks, conf, liveness  # noqa: F401

        # The read token of webfarm.progress.urls' by_token route is a bearer
        # secret. A job id, separators, then the read token: every form the router or
        # nginx's fast path answers or refuses (no slash after it, `//`,
        # `;x`, more path after it; percent-escapes are decoded first).
        hide_in_logs(
            argument="token",
            pattern=rf"(?<![A-Za-z0-9_-]){ID_PATTERN}[^A-Za-z0-9_\s-]+(?P<secret>{ID_PATTERN})(?![A-Za-z0-9_-])",
        )

        # Every app's job types (`<app>/jobs.py`), on web nodes and workers alike.
        autodiscover_modules("jobs")
