"""Each app's settings as the docs list them, written from the apps' own
declarations (webfarm.core.appsettings): the library's in docs/configuration.md
as Django settings, the demo's in demofarm/README.md as the variables it reads.
`python -m demofarm.configdoc` prints both sections, `--write` puts them in
their pages. tests/demo/test_configuration.py holds the pages to them.
"""

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings

from webfarm.core.appsettings import AppSettings, Setting

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "configuration.md"
DEMO_PAGE = ROOT / "demofarm" / "README.md"
BEGIN = "<!-- the apps' settings: written by `python -m demofarm.configdoc --write` -->"
END = "<!-- end of the apps' settings -->"


def app_settings(apps: list[str]) -> list[AppSettings]:
    """The declared settings of those apps that have a conf module, in their order."""
    found = []
    for app in apps:
        if importlib.util.find_spec(app) and importlib.util.find_spec(f"{app}.conf"):
            config = getattr(importlib.import_module(f"{app}.conf"), "get_config", None)
            if isinstance(config, AppSettings):
                found.append(config)
    return found


def _default(value: Any) -> str:
    if isinstance(value, list | dict):
        items = [f"{k}={v}" for k, v in value.items()] if isinstance(value, dict) else value
        return ", ".join(f"`{item}`" for item in items) or "empty"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`" if value != "" else "empty"


def _section(
    configs: list[AppSettings], intro: list[str], named: str, name_of: Callable[[AppSettings, Setting], str]
) -> str:
    """The generated part of a page: `intro`, then a table per app, each
    setting named by `name_of` in the column called `named`."""
    lines = [BEGIN, "", *intro]
    for config in configs:
        lines += [
            "",
            f"### `{config.setting}`",
            "",
            f"| {named} | default | meaning |",
            "| --- | --- | --- |",
        ]
        lines += [
            f"| {name_of(config, item)} | {_default(item.default)} | {item.doc} |" for item in config.declared
        ]
    return "\n".join([*lines, "", END])


def section(configs: list[AppSettings]) -> str:
    """The library's apps' settings, as a project writes them in its settings."""
    intro = [
        "## The apps' settings",
        "",
        "Each app's settings are one dict in the project's settings",
        '(`PROGRESS = {"JOBS_PER_USER": 4}`); a key it leaves out keeps its default.',
    ]
    return _section(configs, intro, "setting", lambda config, item: f'`{config.setting}["{item.key}"]`')


def demo_section(configs: list[AppSettings]) -> str:
    """Every app's settings as the demo reads them: one variable per key."""
    intro = [
        "## The apps' settings, as variables",
        "",
        "The demo reads every key of every app's settings from a variable named for it",
        '(`QUEUES_HOLE_WAIT` is `QUEUES["HOLE_WAIT"]`, `demofarm.env.env_app`): the library\'s are in',
        "[docs/configuration.md](../docs/configuration.md), the demo's own apps' here.",
    ]

    def variable(config: AppSettings, item: Setting) -> str:
        return f"`{config.variable(item)}`" if item.environ else f"settings only: `{item.key}`"

    return _section(configs, intro, "variable", variable)


def page_with(text: str, generated: str) -> str:
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return head + generated + tail


def pages() -> dict[Path, str]:
    """Each page and the section it holds."""
    apps = list(settings.INSTALLED_APPS)
    ours = app_settings([app for app in apps if app.startswith("webfarm.")])
    demo = app_settings([app for app in apps if app.startswith("demofarm.")])
    return {PAGE: section(ours), DEMO_PAGE: demo_section(demo)}


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demofarm.settings")
    for page, generated in pages().items():
        if "--write" in sys.argv[1:]:
            page.write_text(page_with(page.read_text(), generated))
        else:
            print(generated)


if __name__ == "__main__":
    main()
