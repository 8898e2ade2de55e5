"""The demo's settings as the suite runs them, in its own process and in
every farm process it starts (they inherit DJANGO_SETTINGS_MODULE, which
tests/harness/suites.py sets for the demo's suite): the site's own, with the tests' quick
password hasher (tests/harness/hashers.py)."""

import django

from demofarm.settings import *  # noqa: F403 (the site's own settings, as they are)
from demofarm.settings import BASE_DIR, DATABASES

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The in-process tests' database is Django's in-memory one, whose
    # connections share one cache: there a thread reading a table (the pool's
    # follower, every 0.1 s) makes another's write to it fail at once with
    # "database table is locked", where the site's WAL file lets a reader and
    # a writer run side by side. Readers that take no table locks behave as
    # WAL's do. It changes nothing for a file database (farm processes).
    DATABASES["default"]["OPTIONS"]["init_command"] += " PRAGMA read_uncommitted=1;"

PASSWORD_HASHERS = ["tests.harness.hashers.QuickHasher"]

# The static files each Django collects, its admin's among them: the legs of
# `make test` run Django 5.2 and 6.1, and one collecting into the other's
# folder would change the files and manifest its farms serve.
STATIC_ROOT = BASE_DIR / "var" / f"static-django-{django.get_version()}"
