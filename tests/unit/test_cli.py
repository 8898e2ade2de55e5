"""The long-running commands say what they do: never a silent wait."""

import json
import signal
import subprocess
import sys
import time

from tests.harness.processes import ROOT, wait_for
from tests.harness.suites import library_env
from webfarm.activity.handler import QUEUE_NAME
from webfarm.queues.queue import Queue


def test_drain_sitelog_follow_says_what_it_wrote_as_it_goes_and_stops_on_ctrl_c(
    settings, progress_on_real_memcached, tmp_path
):
    env = {
        **library_env(",".join(settings.MEMCACHED["SERVERS"]), progress_on_real_memcached),
        "PYTHONUNBUFFERED": "1",
        "PYTHONFAULTHANDLER": "1",  # a drainer that will not stop says where it is (below)
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
        try:
            assert drainer.wait(timeout=30) == 0, out.read_text()
        except subprocess.TimeoutExpired:
            drainer.send_signal(signal.SIGABRT)  # faulthandler writes every thread's stack
            drainer.wait(timeout=10)
            raise AssertionError(f"the drainer did not stop on Ctrl-C:\n{out.read_text()}") from None
    assert "Traceback" not in out.read_text()
    assert len(log.read_text().splitlines()) == 3
