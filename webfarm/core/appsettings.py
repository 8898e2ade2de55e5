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

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core import checks
from django.core.signals import setting_changed

# Each app's check ids for what is wrong with its dict (check_messages).
NOT_A_DICT, UNKNOWN_KEY, WRONG_TYPE = "E100", "E101", "E102"


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
            given = getattr(settings, self.setting, {})
            # Not a dict: the defaults, and the app's check says so (check_messages).
            merged = self._merged = {**self.defaults, **(given if isinstance(given, dict) else {})}
        return merged

    def well_typed(self) -> bool:
        """Whether the project's dict is a dict whose every known key holds
        a value of its setting's kind (what the apps' own checks compare)."""
        given = getattr(settings, self.setting, {})
        return isinstance(given, dict) and all(
            _fits(value, self.defaults[key]) for key, value in given.items() if key in self.defaults
        )

    def check_messages(self, app_label: str) -> list[checks.CheckMessage]:
        """What is wrong with the project's dict, as system checks of the app
        `app_label`: not a dict, a key no setting has (with the nearest
        one), a value of another type than the setting takes."""
        given = getattr(settings, self.setting, {})
        if not isinstance(given, dict):
            return [
                checks.Error(
                    f"{self.setting} is a {type(given).__name__}, not a dict of settings",
                    hint=f'write it as {self.setting} = {{"{self.declared[0].key}": ...}}',
                    id=f"{app_label}.{NOT_A_DICT}",
                )
            ]
        found: list[checks.CheckMessage] = []
        for key, value in given.items():
            if key not in self.defaults:
                near = difflib.get_close_matches(str(key), list(self.defaults), n=1)
                hint = (
                    f'did you mean {self.setting}["{near[0]}"]?'
                    if near
                    else f"{self.setting} takes {', '.join(self.defaults)} (docs/configuration.md)"
                )
                message = f"{self.setting}[{key!r}] is no setting: it is ignored"
                found.append(checks.Error(message, hint=hint, id=f"{app_label}.{UNKNOWN_KEY}"))
            elif not _fits(value, self.defaults[key]):
                wanted = _kind(self.defaults[key])
                found.append(
                    checks.Error(
                        f'{self.setting}["{key}"] is {value!r}: it takes {wanted}',
                        hint=f'for example {self.setting}["{key}"] = {self.defaults[key]!r} (the default)',
                        id=f"{app_label}.{WRONG_TYPE}",
                    )
                )
        return found

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


def _fits(value: Any, default: Any) -> bool:
    """Whether `value` is of the kind the setting whose default is `default` takes."""
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int | float):
        # A float setting takes a whole number too; neither takes True.
        kinds: tuple[type, ...] = (int,) if isinstance(default, int) else (int, float)
        return isinstance(value, kinds) and not isinstance(value, bool)
    if isinstance(default, list | tuple):
        return isinstance(value, list | tuple) and all(isinstance(item, str) for item in value)
    return isinstance(value, type(default))


def _kind(default: Any) -> str:
    if isinstance(default, bool):
        return "True or False"
    if isinstance(default, int):
        return "a whole number"
    if isinstance(default, float):
        return "a number"
    if isinstance(default, list | tuple):
        return "a list of strings"
    return f"a {type(default).__name__}"
