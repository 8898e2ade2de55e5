from celery.signals import beat_init, worker_init
from django.apps import AppConfig
from django.conf import settings


class CoreConfig(AppConfig):
    name = "webfarm.core"
    label = "webfarm_core"
    verbose_name = "memcached base"

    def ready(self) -> None:
        from webfarm.core import (
            beat,
            checks,  # noqa: F401 (registers the checks)
            counters,  # noqa: F401 (counts refused values: webfarm.core.tampering)
            sessions,
            slots,  # noqa: F401 (its keys are kept together: a pool change moves none alone)
            startup,
            users,
        )

        users.connect_signals()
        if settings.SESSION_ENGINE == sessions.ENGINE:
            sessions.connect_signals()
        # The library's periodic tasks, on whichever beat starts (the Celery
        # app itself is the project's, and may not exist yet).
        beat_init.connect(beat.on_beat_init, weak=False, dispatch_uid="webfarm.core.beat")
        # A worker or beat of the project refuses a configuration the checks call wrong.
        worker_init.connect(startup.on_worker_init, weak=False, dispatch_uid="webfarm.core.startup.worker")
        beat_init.connect(startup.on_beat_init, weak=False, dispatch_uid="webfarm.core.startup.beat")
