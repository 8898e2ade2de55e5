from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "webfarm.core"
    label = "webfarm_core"
    verbose_name = "memcached base"

    def ready(self) -> None:
        from webfarm.core import (
            checks,  # noqa: F401 (registers the checks)
            counters,  # noqa: F401 (counts refused values: webfarm.core.tampering)
        )
        from webfarm.core.users import connect_signals

        connect_signals()
