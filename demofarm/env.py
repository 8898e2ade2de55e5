"""Typed readers for environment variables; settings.py calls each once.

A variable is named for the setting it feeds: QUEUES_HOLE_WAIT feeds
QUEUES["HOLE_WAIT"].
"""

import os
import secrets
import tempfile
from pathlib import Path
from typing import Any

from webfarm.core.appsettings import AppSettings


def _raw(name: str) -> str:
    return os.environ.get(name, "").strip()


def env_str(name: str, default: str) -> str:
    return _raw(name) or default


def env_bool(name: str, default: bool) -> bool:
    value = _raw(name).lower()
    if not value:
        return default
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"{name}={value!r} is not a boolean (use 1/0, true/false)")


def env_int(name: str, default: int) -> int:
    value = _raw(name)
    return int(value) if value else default


def env_float(name: str, default: float) -> float:
    value = _raw(name)
    return float(value) if value else default


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in env_str(name, default).split(",") if item.strip()]


def env_int_map(name: str, default: str = "") -> dict[str, int]:
    """ "a=1,b=2" -> {"a": 1, "b": 2}."""
    result = {}
    for item in env_list(name, default):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip().isdigit():
            raise ValueError(f"{name}: {item!r} is not name=seconds")
        result[key.strip()] = int(value)
    return result


def env_app(config: AppSettings) -> dict[str, Any]:
    """An app's settings dict, each declared setting from its variable
    (QUEUES_HOLE_WAIT) read as its default's type, or its default."""
    values: dict[str, Any] = {}
    for item in config.declared:
        name, default = config.variable(item), item.default
        if not item.environ:
            values[item.key] = default
        elif isinstance(default, bool):
            values[item.key] = env_bool(name, default)
        elif isinstance(default, int):
            values[item.key] = env_int(name, default)
        elif isinstance(default, float):
            values[item.key] = env_float(name, default)
        elif isinstance(default, list):
            values[item.key] = env_list(name, ",".join(default))
        elif isinstance(default, dict):
            values[item.key] = env_int_map(name, ",".join(f"{k}={v}" for k, v in default.items()))
        else:
            values[item.key] = env_str(name, default)
    return values


def key_file(path: Path, fallback: str) -> str:
    """A random key kept in `path`: made on first use, readable by its owner
    only; `fallback` where the file can be neither read nor made."""
    try:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            # Written whole under another name, then linked into place: the
            # processes that start together read one complete key, never a half-written file.
            fd, draft = tempfile.mkstemp(dir=path.parent, prefix=".secret_key.")  # mode 600
            try:
                with os.fdopen(fd, "w") as file:
                    file.write(secrets.token_urlsafe(50))
                os.link(draft, path)
            except FileExistsError:  # another process made it a moment ago: theirs counts
                pass
            finally:
                os.unlink(draft)
        return path.read_text().strip() or fallback
    except OSError:
        return fallback
