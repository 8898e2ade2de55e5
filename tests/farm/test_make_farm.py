"""`make farm` itself (python -m demofarm.farm): it starts nginx, two web
nodes, two workers, beat and its housekeeping worker and two memcached servers on PostgreSQL; a report
started through it runs and is followed on the fast path; a command run
with `python -m demofarm.farm manage` reaches it; Ctrl-C stops every process
it started."""

import os
import signal
import subprocess
import uuid
from pathlib import Path

import pytest
import requests

from demofarm.farm import MEMCACHED_PORTS, WEB_PORT_BASE
from demofarm.launch import answers
from tests.harness import processes
from tests.harness.web import DEMO_PASSWORD, WebClient

pytestmark = pytest.mark.farm


def _listening(port: int) -> bool:
    return answers("127.0.0.1", port)


# Workers and beat listen on no port: found by command line (the rest too).
MARKS = (
    f"-p {MEMCACHED_PORTS[0]}",
    f"127.0.0.1:{WEB_PORT_BASE}",
    "-n worker1@",
    "demofarm beat",
    "-n housekeeping@",
)


def _farm_processes(key: str) -> list[tuple[str, str]]:
    """This farm's processes, by mark: those whose environment holds its
    secret key (tests beside it in a parallel run start beats and workers
    of their own)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            line = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone, or not ours to read
            continue
        if f"DJANGO_SECRET_KEY={key}".encode() in environ:
            found.extend((mark, line) for mark in MARKS if mark in line)
    return found


def test_make_farm_runs_a_job_through_nginx_and_ctrl_c_stops_it_all(tmp_path):
    ports = [*MEMCACHED_PORTS, WEB_PORT_BASE, WEB_PORT_BASE + 1]
    busy = [port for port in ports if _listening(port)]
    assert not busy, f"ports the farm uses are taken: {busy}"
    port = processes.free_port()
    with processes.postgres_database("webfarm_make_farm") as database_url:
        key = "make-farm-" + uuid.uuid4().hex
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "DEMO_ORDERS": "3000",
            "DEMO_PASSWORD": DEMO_PASSWORD,
            "MEMCACHED_NAMESPACE": "makefarm",
            "DJANGO_SECRET_KEY": key,
        }
        argv = [str(processes.BIN / "python"), "-m", "demofarm.farm", "--port", str(port)]
        farm = processes.Process("make-farm", argv, log_dir=tmp_path, env=env).start()
        try:
            base = f"http://127.0.0.1:{port}"
            processes.wait_for(
                lambda: not farm.alive() or _listening(port), timeout=120, what="nginx listening"
            )
            assert farm.alive(), farm.log()
            # nginx starts once the nodes listen: its very first answer is a page, not a 502.
            first = requests.get(f"{base}/accounts/login/", timeout=60)
            assert first.status_code == 200, (first.status_code, first.text[:200])
            # Both nodes up first: a node nginx found refusing is skipped for 5 s.
            processes.wait_for(
                lambda: (
                    not farm.alive()
                    or (
                        all(_listening(p) for p in ports)
                        and requests.get(f"{base}/accounts/login/", timeout=2).ok
                    )
                ),
                timeout=120,
                what="the farm behind nginx",
            )
            assert farm.alive(), farm.log()
            alice = WebClient(base).login("alice")
            started = alice.post(
                "/reports/top-customers/",
                {"date_from": "2024-01-01", "date_to": "2025-12-31", "top": 5},
                headers={"Accept": "application/json"},
            )
            assert started.status_code == 202, started.text
            poll = f"{base}{started.json()['public_progress_url']}"
            sources: list[str] = []

            def finished() -> bool:
                answer = requests.get(poll, timeout=5)
                assert answer.status_code == 200, answer.text
                sources.append(answer.headers.get("X-Progress-Source", "django"))
                return answer.json()["state"] == "succeeded"

            processes.wait_for(finished, timeout=120, what="the report, polled through nginx", interval=0.2)
            assert "memcached" in sources, sources  # the fast path answered
            # A command by hand against this farm reads its memcached, not make run's.
            by_hand = subprocess.run(
                [*argv[:3], "manage", "dead_letters", "sitelog"],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert by_hand.returncode == 0, by_hand.stderr
            assert by_hand.stdout.startswith("0 dead letters of sitelog"), by_hand.stdout
            for port_in_use in ports:
                assert _listening(port_in_use), port_in_use
            assert {mark for mark, _ in _farm_processes(key)} == set(MARKS)
        finally:
            # Ctrl-C in a terminal: SIGINT to the whole foreground group.
            if farm.alive():
                os.killpg(farm.proc.pid, signal.SIGINT)
            farm.proc.wait(timeout=60)
        assert "Ctrl-C stops them all" in farm.log()
        processes.wait_for(
            lambda: not any(_listening(p) for p in [*ports, port]), timeout=15, what="every port closed"
        )
        assert not _farm_processes(key), _farm_processes(key)
