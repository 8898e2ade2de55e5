"""Attacks by someone who can reach memcached (or holds the queue token), on a
real farm: a web node of two gunicorn processes, a Celery worker and a small
memcached run with -M that is store and broker at once.

Each test is the attack as the audit of issue 26 ran it: an old copy kept and
written back after the change that superseded it (a demoted staff user, a
session after logout), and a flood of puts through the HTTP front.
"""

import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from tests.harness import keyspace, processes
from tests.harness.processes import wait_for
from tests.harness.web import DEMO_PASSWORD, WebClient

pytestmark = pytest.mark.farm

NAMESPACE = "attacks"
TOKEN = "attacks-api-token"
ALL_DATES = {"date_from": "2024-01-01", "date_to": "2025-12-31", "top": "5", "region": ""}


@dataclass
class Farm:
    env: dict
    base: str
    address: str


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    tmp_path: Path = tmp_path_factory.mktemp("attacks")
    with processes.stopped_after() as started:
        mc, address = processes.memcached(tmp_path, memory_mb=8, extra=["-M"])
        started.append(mc)
        env = processes.one_memcached_env(
            tmp_path,
            address,
            NAMESPACE,
            DEMO_ORDERS=2000,
            QUEUE_API_TOKEN=TOKEN,
            QUEUES_HTTP_MAX_BYTES=1024 * 1024,
            QUEUES_HTTP_MAX_TOTAL_BYTES=2 * 1024 * 1024,
        )
        processes.manage(env, "migrate", "--no-input", "-v", "0")
        processes.manage(env, "seed_demo", "-v", "0")
        started.append(processes.celery_worker(env, tmp_path, "attacks-worker"))
        web, base = processes.gunicorn(env, tmp_path, "attacks-node")
        started.append(web)
        yield Farm(env=env, base=base, address=address)


def _shell(farm: Farm, code: str) -> str:
    """Python run by another process of the farm (a manage.py shell)."""
    return processes.manage(farm.env, "shell", "-c", code)


def _values(farm: Farm, family: str) -> dict[str, tuple[bytes, int]]:
    """Every value memcached holds under keys of `family` ("user:", "session:"),
    with its flags (Django's cache says with them what the bytes are)."""
    host, port = farm.address.rsplit(":", 1)
    values = {}
    for item in keyspace.items(farm.address, f"{NAMESPACE}:{family}"):
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(b"mg %s v f\r\n" % item.key.encode())
            reply = b""
            while b"\r\n" not in reply or not reply.endswith(b"\r\n") or reply.count(b"\r\n") < 2:
                chunk = sock.recv(1 << 16)
                if not chunk:
                    break
                reply += chunk
        header, value = reply.split(b"\r\n", 1)
        if not header.startswith(b"VA "):
            continue  # gone meanwhile
        size = int(header.split()[1])
        flags = next(int(flag[1:]) for flag in header.split()[2:] if flag.startswith(b"f"))
        values[item.key] = (value[:size], flags)
    return values


def _write_back(farm: Farm, values: dict[str, tuple[bytes, int]]) -> None:
    for key, (value, flags) in values.items():
        keyspace.plant(farm.address, key, value, flags=flags)


def test_a_demoted_staff_users_old_copy_written_back_is_refused(farm):
    _shell(
        farm,
        "from django.contrib.auth import get_user_model; "
        "get_user_model().objects.create_user("
        f"'carol', password={DEMO_PASSWORD!r}, is_staff=True, is_superuser=True)",
    )
    carol = WebClient(farm.base).login("carol")
    assert carol.get("/admin/dashboard/").status_code == 200
    kept = _values(farm, "user:")
    assert kept, "no cached user to keep"
    # Demoted by another process (the admin's node), then the old copy is written back.
    _shell(
        farm,
        "from django.contrib.auth import get_user_model; u = get_user_model().objects.get(username='carol'); "
        "u.is_staff = u.is_superuser = False; u.save()",
    )
    _write_back(farm, kept)
    # Every process of the node learns of the change within a second or so; then
    # no request sees the dashboard (two gunicorn processes, several requests each).
    wait_for(
        lambda: carol.get("/admin/dashboard/", allow_redirects=False).status_code != 200,
        timeout=10,
        what="the demotion seen",
    )
    time.sleep(1.5)  # past REFRESH: every process has read the revocation
    _write_back(farm, kept)
    statuses = {carol.get("/admin/dashboard/", allow_redirects=False).status_code for _ in range(12)}
    assert 200 not in statuses, statuses


def test_a_session_written_back_after_logout_stays_logged_out(farm):
    alice = WebClient(farm.base).login("alice")
    assert alice.get("/jobs/").status_code == 200
    cookie = alice.session.cookies["sessionid"]
    kept = _values(farm, "session:")
    assert kept, "no cached session to keep"
    alice.post("/accounts/logout/")
    _write_back(farm, kept)
    time.sleep(1.5)  # past REFRESH: every process has read the revocation
    _write_back(farm, kept)
    replayed = requests.Session()
    replayed.cookies.set("sessionid", cookie)
    for _ in range(12):  # both gunicorn processes
        response = replayed.get(f"{farm.base}/jobs/", allow_redirects=False, timeout=10)
        assert response.status_code == 302 and "/accounts/login/" in response.headers["Location"]


def test_a_flood_of_puts_leaves_room_for_the_farms_work(farm):
    """One holder of the queue token fills what the HTTP front may hold, in
    several queues, and the farm's own work goes on in the same memcached:
    a report starts and runs."""
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    accepted, statuses = 0, []
    deadline = time.monotonic() + 60
    with requests.Session() as flood:
        for n in range(200):  # bounded: 200 puts of 60 KB at most, or a minute
            if time.monotonic() > deadline:
                break
            response = flood.post(
                f"{farm.base}/queues/flood{n % 4}/", data=b"x" * 60_000, headers=bearer, timeout=10
            )
            statuses.append(response.status_code)
            accepted += 60_000 if response.status_code == 201 else 0
    assert 507 in statuses and set(statuses) <= {201, 507}, statuses
    refused = [s for s in statuses[-20:] if s == 507]
    assert len(refused) == 20, statuses[-20:]  # at capacity, it stays refused
    assert accepted <= 2 * 1024 * 1024 + 4 * 60_000, accepted  # the front's total, racing puts aside
    # The farm's work goes on.
    alice = WebClient(farm.base).login("alice")
    job = alice.start_report("top-customers", ALL_DATES)["job"]
    assert alice.wait_until(job, lambda p: p["final"], timeout=60)["state"] == "succeeded"
    stats = keyspace.stats(farm.address)
    assert stats.get("bytes", 0) < stats["limit_maxbytes"]
