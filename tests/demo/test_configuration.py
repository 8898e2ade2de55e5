"""One declaration per setting (webfarm.core.appsettings.Setting): its default, its
type, its environment variable and its line in docs/configuration.md all come
from it, and the page is held to it here."""

import re
from pathlib import Path

import pytest
from django.conf import settings

from demofarm.configdoc import DEMO_PAGE, app_settings, page_with, pages
from demofarm.env import env_app
from webfarm.core.appsettings import AppSettings, Setting

ROOT = Path(__file__).resolve().parents[2]


def test_the_pages_list_every_declared_setting_as_declared():
    configs = app_settings(list(settings.INSTALLED_APPS))
    assert {config.setting for config in configs} >= {"MEMCACHED", "PROGRESS", "QUEUES", "LIMITS"}
    for page, generated in pages().items():
        text = page.read_text()
        assert page_with(text, generated) == text, "run: python -m demofarm.configdoc --write"
    # The library's page names the settings a project sets, never the demo's variables.
    library = next(iter(pages().values()))
    assert 'MEMCACHED["SERVERS"]' in library and "MEMCACHED_SERVERS" not in library


def test_every_variable_the_demo_reads_is_on_its_page():
    """Listed on the demo's page, or named by its rule for the library's
    settings (QUEUES_HOLE_WAIT is QUEUES["HOLE_WAIT"])."""
    text = DEMO_PAGE.read_text()
    by_rule = {
        config.variable(item)
        for config in app_settings([app for app in settings.INSTALLED_APPS if app.startswith("webfarm.")])
        for item in config.declared
    }
    read = {
        name
        for package in ("webfarm", "demofarm")
        for source in (ROOT / package).rglob("*.py")
        for name in re.findall(r'(?:env_\w+|os\.environ\.get)\("([A-Z][A-Z0-9_]+)"', source.read_text())
    } - {"USER"}  # the login's own, for nginx's user directive
    assert "DATABASE_URL" in read and "DEMO_ORDERS" in read  # the scan sees both ways of reading
    missing = sorted(name for name in read - by_rule if f"`{name}`" not in text)
    assert missing == []


def test_a_variable_is_read_as_its_defaults_type(monkeypatch):
    config = AppSettings(
        "EXAMPLE_APP",
        [
            Setting("COUNT", 3, ""),
            Setting("PAUSE", 0.5, ""),
            Setting("ON", False, ""),
            Setting("NAME", "x", ""),
            Setting("SERVERS", ["a:1"], ""),
            Setting("LIMITS", {}, ""),
            Setting("OPTIONS", {"pool": 1}, "", environ=False),
        ],
    )
    assert env_app(config) == {
        "COUNT": 3,
        "PAUSE": 0.5,
        "ON": False,
        "NAME": "x",
        "SERVERS": ["a:1"],
        "LIMITS": {},
        "OPTIONS": {"pool": 1},
    }
    for name, value in {
        "COUNT": "7",
        "PAUSE": "2",
        "ON": "yes",
        "NAME": "y",
        "SERVERS": "b:2, c:3",
        "LIMITS": "sales=60",
        "OPTIONS": "pool=9",
    }.items():
        monkeypatch.setenv(f"EXAMPLE_APP_{name}", value)
    assert env_app(config) == {
        "COUNT": 7,
        "PAUSE": 2.0,
        "ON": True,
        "NAME": "y",
        "SERVERS": ["b:2", "c:3"],
        "LIMITS": {"sales": 60},
        "OPTIONS": {"pool": 1},  # no variable says pymemcache's keyword arguments
    }
    monkeypatch.setenv("EXAMPLE_APP_COUNT", "many")
    with pytest.raises(ValueError):
        env_app(config)


def test_settings_that_had_no_variable_have_one(monkeypatch):
    """QUEUED_LEASE, REQUEST_LEASE and FLUSH_BATCH could not be set from the environment."""
    from demofarm.polls.conf import get_config as polls
    from webfarm.limits.conf import get_config as limits
    from webfarm.progress.conf import get_config as progress

    monkeypatch.setenv("PROGRESS_QUEUED_LEASE", "900")
    monkeypatch.setenv("LIMITS_REQUEST_LEASE", "90")
    monkeypatch.setenv("POLLS_FLUSH_BATCH", "50")
    assert env_app(progress)["QUEUED_LEASE"] == 900
    assert env_app(limits)["REQUEST_LEASE"] == 90
    assert env_app(polls)["FLUSH_BATCH"] == 50
