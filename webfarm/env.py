"""Typed readers for environment variables; settings.py calls each once."""

import os


def env_str(name: str, default: str) -> str:
    value = os.environ.get(name, "").strip()
    return value or default


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return default
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"{name}={value!r} is not a boolean (use 1/0, true/false)")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip()
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
