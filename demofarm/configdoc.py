"""Each app's settings as docs/configuration.md lists them, written from the
apps' own declarations (webfarm.core.appsettings): `python -m demofarm.configdoc`
prints the section, `--write` puts it in the page. tests/unit/test_configuration.py
holds the page to it.
"""

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from django.conf import settings

from webfarm.core.appsettings import AppSettings

PAGE = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
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


def section(configs: list[AppSettings]) -> str:
    lines = [
        BEGIN,
        "",
        "## The apps' settings",
        "",
        "Each app declares its settings once, in its `conf.py`: default, type, variable and the line below.",
        "In Django's settings each app's are one dict (`PROGRESS = {\"FLUSH_INTERVAL\": 1.0}`), and a key",
        "missing from it keeps its default; this project's `demofarm/settings.py` reads every key from its",
        "variable (`demofarm.env.env_app`).",
    ]
    for config in configs:
        lines += [
            "",
            f"### `{config.setting}`",
            "",
            "| variable | default | meaning |",
            "| --- | --- | --- |",
        ]
        for item in config.declared:
            variable = f"`{config.variable(item)}`" if item.environ else f"settings only: `{item.key}`"
            lines.append(f"| {variable} | {_default(item.default)} | {item.doc} |")
    return "\n".join([*lines, "", END])


def page_with(text: str, generated: str) -> str:
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return head + generated + tail


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demofarm.settings")
    generated = section(app_settings(list(settings.INSTALLED_APPS)))
    if "--write" in sys.argv[1:]:
        PAGE.write_text(page_with(PAGE.read_text(), generated))
    else:
        print(generated)


if __name__ == "__main__":
    main()
