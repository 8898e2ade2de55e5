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
import signal

OUTSIDE = ("DATABASE_URL", "MEMCACHED_SERVERS", "QUEUES_MIRRORS", "CELERY_BROKER_URL")

for _name in OUTSIDE:
    os.environ.pop(_name, None)

# A suite started as a background job by a script (`make test &`) inherits
# SIGINT ignored, and so would every process it starts: Python then installs
# no KeyboardInterrupt, and a test that presses Ctrl-C on a drainer or a farm
# would see nothing happen (tests/unit/test_cli.py did, only in such runs).
# The processes a test starts take Ctrl-C as from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
