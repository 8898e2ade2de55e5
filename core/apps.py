from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "memcached base"

    def ready(self) -> None:
        from core import (
            checks,  # noqa: F401 (registers the checks)
            counters,  # noqa: F401 (counts refused values: core.tampering)
        )
        from core.users import connect_signals

        connect_signals()
