"""The demo's settings as the suite runs them, in its own process and in
every farm process it starts (they inherit DJANGO_SETTINGS_MODULE from
pyproject.toml's pytest settings): the site's own, with the tests' quick
password hasher (tests/harness/hashers.py)."""

from demofarm.settings import *  # noqa: F403 (the site's own settings, as they are)

PASSWORD_HASHERS = ["tests.harness.hashers.QuickHasher"]
