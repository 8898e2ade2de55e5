"""One way for every app to declare and read its settings.

    get_config = AppSettings("QUEUES", [
        Setting("VISIBILITY_TIMEOUT", 60, "seconds a claimed message stays hidden"),
    ])
    get_config()["VISIBILITY_TIMEOUT"]

A declaration is the one source of a setting: its default, its type (the
default's), its environment variable (`QUEUES_VISIBILITY_TIMEOUT`, read by
the demo site's env_app) and its line in docs/configuration.md (written by
`python -m demofarm.configdoc`, held to it by tests/demo/test_configuration.py).

An app's settings are its defaults overlaid by the dict of that name in
Django's settings, merged once (hot paths read them per call) and merged
again when a test changes that setting (override_settings, pytest-django's
`settings`). Whatever was built from them (clients, pools) asks to be told
with `get_config.when_changed(drop)`, from its own module: a settings module
knows none of its users.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed


@dataclass(frozen=True)
class Setting:
    key: str
    default: Any
    # One line for the docs: what it sets, in which unit.
    doc: str
    # False for what an environment variable cannot say (pymemcache's keyword
    # arguments): Django's settings only.
    environ: bool = True


class AppSettings:
    def __init__(self, setting: str, declared: Sequence[Setting]) -> None:
        self.setting = setting
        self.declared = tuple(declared)
        self.defaults: dict[str, Any] = {item.key: item.default for item in self.declared}
        self._listeners: list[Callable[[], None]] = []
        self._merged: dict[str, Any] | None = None
        # weak=False: the receiver is a bound method, kept as long as this object.
        setting_changed.connect(self._changed, weak=False)

    def __call__(self) -> dict[str, Any]:
        merged = self._merged
        if merged is None:
            merged = self._merged = {**self.defaults, **getattr(settings, self.setting, {})}
        return merged

    def variable(self, item: Setting) -> str:
        """The environment variable that sets `item`: named for the setting it feeds."""
        return f"{self.setting}_{item.key}"

    def when_changed(self, listener: Callable[[], None]) -> None:
        """Call `listener` each time this setting changes (tests)."""
        self._listeners.append(listener)

    def cache_clear(self) -> None:
        self._merged = None

    def _changed(self, *, setting: str, **kwargs: Any) -> None:
        if setting == self.setting:
            self._merged = None
            for listener in self._listeners:
                listener()
