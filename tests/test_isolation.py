"""The suite never reaches a farm it did not start: a memcached on the address
the settings name by default (a developer's `make run`, say) sees no write
while in-process tests run, not even from a thread that ships log records
after a test has ended."""

import os
import subprocess
import sys

import pytest

from tests import keyspace, processes
from tests.processes import ROOT

pytestmark = pytest.mark.farm


def test_in_process_tests_write_nothing_to_the_default_memcached(tmp_path):
    with processes.stopped_after() as started:
        sentinel, address = processes.memcached(tmp_path)
        started.append(sentinel)
        env = {**os.environ, "MEMCACHED_SERVERS": address}  # the default address, as a developer has it
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-m",
                "not farm",
                "tests/test_activity.py",
                "tests/test_users.py",
                "tests/test_sessions.py",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stdout[-3000:]
        stats = keyspace.stats(address)
        assert (stats["cmd_set"], stats["curr_items"], stats["total_items"]) == (0, 0, 0), stats
