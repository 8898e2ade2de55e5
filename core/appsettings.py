"""One way for every app to read its settings.

    get_config = AppSettings("QUEUES", DEFAULTS)
    get_config()["VISIBILITY_TIMEOUT"]

An app's settings are its DEFAULTS overlaid by the dict of that name in
Django's settings, merged once (hot paths read them per call) and merged
again when a test changes that setting (override_settings, pytest-django's
`settings`), when `on_change` also runs (to drop clients built from them).
"""

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed


class AppSettings:
    def __init__(
        self, setting: str, defaults: dict[str, Any], *, on_change: Callable[[], None] | None = None
    ) -> None:
        self.setting = setting
        self.defaults = defaults
        self._on_change = on_change
        self._merged: dict[str, Any] | None = None
        # weak=False: the receiver is a bound method, kept as long as this object.
        setting_changed.connect(self._changed, weak=False)

    def __call__(self) -> dict[str, Any]:
        merged = self._merged
        if merged is None:
            merged = self._merged = {**self.defaults, **getattr(settings, self.setting, {})}
        return merged

    def cache_clear(self) -> None:
        self._merged = None

    def _changed(self, *, setting: str, **kwargs: Any) -> None:
        if setting == self.setting:
            self._merged = None
            if self._on_change is not None:
                self._on_change()
