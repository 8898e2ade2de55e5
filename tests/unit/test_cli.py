"""The long-running commands say what they do: never a silent wait."""

import json
import os
import signal
import subprocess
import sys
import time

from activity.handler import QUEUE_NAME
from queues.core import Queue
from tests.harness.processes import ROOT, wait_for


def test_drain_sitelog_follow_says_what_it_wrote_as_it_goes_and_stops_on_ctrl_c(
    settings, progress_on_real_memcached, tmp_path
):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "webfarm.settings",
        "MEMCACHED_SERVERS": ",".join(settings.MEMCACHED["SERVERS"]),
        "MEMCACHED_NAMESPACE": progress_on_real_memcached,
        "PYTHONUNBUFFERED": "1",
    }
    out = tmp_path / "out.txt"
    log = tmp_path / "activity.log"
    argv = [sys.executable, "manage.py", "drain_sitelog", "--follow", "--file", str(log)]
    with (
        out.open("w") as sink,
        subprocess.Popen(argv, cwd=ROOT, env=env, stdout=sink, stderr=sink) as drainer,
    ):
        try:
            wait_for(lambda: "until stopped" in out.read_text(), timeout=30, what="the drainer's first line")
            Queue(QUEUE_NAME).put_many(
                [json.dumps({"message": f"line {i}", "ts": time.time()}).encode() for i in range(3)]
            )
            wait_for(
                lambda: "(3 since the start)" in out.read_text(), timeout=30, what="a line about the batch"
            )
        finally:
            drainer.send_signal(signal.SIGINT)
        assert drainer.wait(timeout=30) == 0, out.read_text()
    assert "Traceback" not in out.read_text()
    assert len(log.read_text().splitlines()) == 3
