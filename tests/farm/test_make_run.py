"""`make run` itself (python -m demofarm.launch): its console shows the
address and logins, the requests, the jobs and what housekeeping did, and
not Celery's banners, its root warning or a line for every periodic task."""

import os
import re
import signal
import subprocess
import uuid
from pathlib import Path

import pytest
import requests

from demofarm.launch import memcached_version
from tests.harness import processes
from tests.harness.web import DEMO_PASSWORD, WebClient, create_poll, vote_anonymously

pytestmark = pytest.mark.farm

NOISE = [
    re.compile(r"Task (polls\.flush_votes|activity\.drain_sitelog|progress\.reap_lost_jobs)\["),
    re.compile(r"Sending due task"),
    re.compile(r"-------------- celery@|\[tasks\]|__    -    \.\.\. __"),  # the workers' and beat's banners
    re.compile(r"SecurityWarning|superuser privileges"),
    re.compile(r"harvested \d+ increments"),
    # Answered polls are counted, not written line by line (webfarm.activity.accesslog).
    re.compile(r'"GET /progress/[^"]*" 200'),
]


def test_make_run_s_console_is_calm_and_says_what_happened(tmp_path):
    mc, address = processes.memcached(tmp_path)
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'run.sqlite3'}",
        "MEMCACHED_SERVERS": address,  # the launcher starts no memcached of its own
        "CELERY_BROKER_URL": f"memcached://{address}",
        "MEMCACHED_NAMESPACE": "makerun",
        "CELERY_TASK_DEFAULT_QUEUE": "makerun",
        "DJANGO_SECRET_KEY": "make-run-" + uuid.uuid4().hex,
        "DEMO_PASSWORD": DEMO_PASSWORD,
        "DEMO_ORDERS": "3000",
        "ACTIVITY_LOG_FILE": str(tmp_path / "activity.log"),
        "POLLS_FLUSH_EVERY": "1",
    }
    for command in (["migrate", "--no-input", "-v", "0"], ["seed_demo", "-v", "0"]):
        processes.manage(env, *command)
    port = processes.free_port()
    argv = [str(processes.BIN / "python"), "-m", "demofarm.launch", "--port", str(port)]
    run = processes.Process("make-run", argv, log_dir=tmp_path, env=env).start()
    try:
        base = f"http://127.0.0.1:{port}"
        processes.wait_for(
            lambda: not run.alive() or requests.get(f"{base}/accounts/login/", timeout=2).ok,
            timeout=60,
            what="the web process",
        )
        assert run.alive(), run.log()
        alice = WebClient(base).login("alice")
        job = alice.start_report(
            "top-customers", {"date_from": "2024-01-01", "date_to": "2025-12-31", "top": 5}
        )
        alice.wait_until(job["job"], lambda p: p["final"], timeout=60, what="the report")
        poll, (yes, _) = create_poll(env, "Calm?", ["Yes", "No"])
        # The flusher makes the poll's totals, then stores the vote: housekeeping that did something.
        processes.wait_for(
            lambda: vote_anonymously(base, poll, yes).status_code == 200, timeout=30, what="a vote"
        )
        processes.wait_for(lambda: "1 stored" in run.log(), timeout=30, what="the flusher storing the vote")
    finally:
        if run.alive():
            os.killpg(run.proc.pid, signal.SIGINT)  # Ctrl-C
        run.proc.wait(timeout=60)
        mc.stop()
    console = run.log()
    assert f"webfarm is starting: http://127.0.0.1:{port}/" in console
    assert f"job {job['job']} ended: succeeded" in console
    assert re.search(r'"POST /reports/top-customers/ HTTP/1.1" 202', console)
    assert re.search(r'"GET /accounts/login/ HTTP/1.1" 200', console)  # other requests still are
    for noise in NOISE:
        assert not noise.search(console), [line for line in console.splitlines() if noise.search(line)]


def _descendants(pid: int) -> set[int]:
    """Every process below pid (honcho starts each in a session of its own)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_ctrl_c_with_the_console_piped_into_tee_stops_every_process(tmp_path):
    """The same Ctrl-C ends tee first: the launcher must still stop them all,
    memcached on the port it was given included."""
    port, memcached_port = processes.free_port(), processes.free_port()
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'run.sqlite3'}",
        "MEMCACHED_NAMESPACE": "makeruntee",
        "CELERY_TASK_DEFAULT_QUEUE": "makeruntee",
        "DJANGO_SECRET_KEY": "make-run-" + uuid.uuid4().hex,
        "ACTIVITY_LOG_FILE": str(tmp_path / "activity.log"),
    }
    processes.manage({**env, "MEMCACHED_SERVERS": f"127.0.0.1:{memcached_port}"}, "migrate", "--no-input")
    console = tmp_path / "console.log"
    launch = f"{processes.BIN / 'python'} -m demofarm.launch --port {port} --memcached-port {memcached_port}"
    shell = subprocess.Popen(
        ["bash", "-c", f"{launch} 2>&1 | tee {console}"],
        cwd=processes.ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    launched: set[int] = set()
    try:
        processes.wait_for(
            lambda: requests.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=2).ok,
            timeout=60,
            what="the web process",
        )
        assert memcached_version("127.0.0.1", memcached_port), "the launcher's own memcached"
        processes.wait_for(lambda: "worker started" in console.read_text(), timeout=30, what="the worker")
        launched |= _descendants(shell.pid)
        assert len(launched) >= 10  # tee, the launcher, honcho's four, their shells and programs
        os.killpg(shell.pid, signal.SIGINT)  # Ctrl-C: to make, the launcher, tee and the rest
        shell.wait(timeout=60)
        processes.wait_for(
            lambda: not [pid for pid in launched if _alive(pid)],
            timeout=30,
            what="every process of the launch to end",
        )
        assert memcached_version("127.0.0.1", memcached_port) is None
    finally:
        for pid in launched | _descendants(shell.pid):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        shell.kill()
