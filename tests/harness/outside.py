"""The services of the world outside the suite, forgotten before Django's
settings load.

Loaded with `-p tests.harness.outside` (pyproject.toml's addopts), so this module runs
before pytest-django imports the settings. A developer's shell may name their
own farm's database, memcached or broker (an exported DATABASE_URL, say):
neither the in-process tests nor the processes the farm tests start, whose
environments copy this one, may reach it. Every test names the services it
started instead (tests/harness/processes.py); what none names falls to the settings'
defaults, which tests/conftest.py points at a port where nothing listens.
"""

import os

OUTSIDE = ("DATABASE_URL", "MEMCACHED_SERVERS", "QUEUES_MIRRORS", "CELERY_BROKER_URL")

for _name in OUTSIDE:
    os.environ.pop(_name, None)
