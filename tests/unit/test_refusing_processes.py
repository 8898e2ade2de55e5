"""A project's own worker, beat and web node refuse a configuration the
library's checks call wrong, and say why, before they serve (gunicorn and
Celery run no checks of their own). Real processes of the test project,
started as a team starts theirs, each with a misspelt MEMCACHED key."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.processes import ROOT, free_port
from tests.harness.suites import library_env

BIN = Path(sys.executable).parent
SAID = "refusing to start, the configuration has errors:"
WHY = "(webfarm_core.E101) MEMCACHED['SERVER'] is no setting: it is ignored"


def _misconfigured(memcached_server: str, namespace: str) -> dict:
    env = library_env(memcached_server, namespace)
    env["WEBFARM_TEST_SETTINGS"] = json.dumps({"MEMCACHED": {"SERVER": [memcached_server]}})
    return env


@pytest.mark.parametrize(
    ("process", "argv"),
    [
        ("worker", ["celery", "-A", "tests.project", "worker", "--pool", "solo", "-l", "warning"]),
        ("beat", ["celery", "-A", "tests.project", "beat", "-l", "warning", "-s", "{tmp}/schedule"]),
        ("web", ["gunicorn", "tests.project.wsgi:application", "-b", "127.0.0.1:{port}", "-w", "1"]),
    ],
)
def test_a_process_of_the_project_refuses_a_wrong_setting_and_says_why(
    memcached_server, progress_on_real_memcached, tmp_path, process, argv
):
    argv = [str(BIN / argv[0]), *(a.format(tmp=tmp_path, port=free_port()) for a in argv[1:])]
    result = subprocess.run(
        argv,
        cwd=ROOT,
        env=_misconfigured(memcached_server, progress_on_real_memcached),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert f"webfarm {process}: {SAID}" in result.stderr and WHY in result.stderr, result.stderr[-3000:]
    assert 'HINT: did you mean MEMCACHED["SERVERS"]?' in result.stderr
