"""The soak's farm and traffic (tests/farm/test_soak.py; bench/memory.py runs it for longer)."""

import json
import os
import re
import subprocess
import time
from pathlib import Path

from tests.harness import keyspace, processes
from tests.harness.processes import wait_for
from tests.harness.web import WebClient

TOTAL = int(os.environ.get("SOAK_TOTAL", "20000"))
THREADS = 2
CONNECTIONS = 16
SHORT = 5  # seconds: the farm's short lifetimes for this test
BOUND_ITEMS = 64
BOUND_BYTES = 64 * 1024
LUA = Path(__file__).with_name("soak.lua")
NAMESPACE = "soak"

SHORT_LIFETIMES = {
    "SESSION_CACHE_TTL": SHORT,
    "PROGRESS_FINAL_TTL": SHORT,
    "POLLS_MARKER_TTL": SHORT,
    "POLLS_ANONYMOUS_WINDOW": SHORT,
    "QUEUES_HOLE_TTL": SHORT,
    "QUEUES_FINISHED_TTL": 60,  # acked entries are deleted as the floor passes them, long before
}


def soak_env(base: Path, address: str) -> dict:
    return processes.one_memcached_env(
        base,
        address,
        NAMESPACE,
        DEMO_ORDERS=2000,
        ACTIVITY_DRAIN_EVERY=1,
        POLLS_FLUSH_EVERY=0.5,
        STATS_HARVEST_EVERY=5,
        PROGRESS_HEARTBEAT_INTERVAL=1,
        REAP_EVERY=1,
        POLLS_ANONYMOUS_PER_ADDRESS=10_000_000,  # every voter comes from 127.0.0.1 here
        **SHORT_LIFETIMES,
    )


def _shell(env: dict, code: str) -> str:
    return processes.manage(env, "shell", "-c", code).strip().splitlines()[-1]


def memory(address: str) -> tuple[int, int]:
    """(items, bytes) memcached holds, once it has freed what expired."""
    keyspace.reclaim_expired(address)
    time.sleep(0.2)  # the crawler runs in the background
    stats = keyspace.stats(address)
    return stats["curr_items"], stats["bytes"]


def _queues(address: str) -> dict[str, tuple[bytes, int, int]]:
    """Every queue's (generation, tail, floor) now, by its key prefix."""
    found: dict[str, tuple[bytes, int, int]] = {}
    with keyspace.raw_client(address, NAMESPACE) as client:
        for prefix in ("", "broker:"):
            names = (client.get(f"{prefix}q:registry") or b"").decode().split()
            for name in names:
                base = f"{prefix}q:{name}"
                gen = client.get(f"{base}:gen")
                if gen is None:
                    continue
                keys = [f"{base}:{gen.decode()}:{k}" for k in ("tail", "floor")]
                counters = client.get_many(keys)
                found[base] = (gen, int(counters.get(keys[0], 0)), int(counters.get(keys[1], 1)))
    return found


def drained(address: str, tails: dict[str, tuple[bytes, int, int]]) -> bool:
    """Every queue's floor past its tail in `tails`: everything sent up to
    then is finished. Not "past the tail now": beat sends its housekeeping
    every half second, and a floor moves only with a consumer's recovery
    scan (webfarm/queues/recovery.py), which often comes while the latest
    task is still running; a floor past the tail of the moment was then a
    race the soak lost for minutes."""
    now = _queues(address)
    for base, (gen, tail, _) in tails.items():
        if base not in now or now[base][0] != gen or now[base][2] <= tail:
            return False
    return True


def wait_drained(address: str, *, timeout: float, what: str) -> None:
    """Wait for the drainers to finish every message sent until now."""
    tails = _queues(address)
    wait_for(lambda: drained(address, tails), timeout=timeout, interval=0.5, what=what)


def prepare(base_url: str, env: dict) -> list[str]:
    """A poll, a user who logs in, a finished job: the soak script's arguments."""
    poll, choice = json.loads(
        _shell(
            env,
            "import json; from demofarm.polls.models import Poll; p = Poll.objects.create(question='Soak?'); "
            "print(json.dumps([p.id, p.choices.create(text='yes').id]))",
        )
    )
    _shell(
        env,
        "from django.contrib.auth import get_user_model; "
        "get_user_model().objects.create_user('soak', password='soak-password-1')",
    )
    client = WebClient(base_url).login("alice")
    job = client.start_report(
        "top-customers", {"date_from": "2024-01-01", "date_to": "2025-12-31", "top": "5", "region": ""}
    )
    client.wait_until(job["job"], lambda p: p["final"], timeout=60, what="the first job")
    token = job["public_progress_url"].rstrip("/").rsplit("/", 1)[1]
    session, csrf = client.session.cookies["sessionid"], client.session.cookies["csrftoken"]
    return [str(poll), str(choice), job["job"], token, session, csrf]


def run_traffic(base_url: str, args: list[str], total: int, *, chunk: int = 10) -> dict[int, int]:
    """At least `total` requests of the soak's mix under wrk, run `chunk`
    seconds at a time; the count of answers of each status."""
    argv = ["wrk", "-t", str(THREADS), "-c", str(CONNECTIONS), "-d", f"{chunk}s", "-s", str(LUA), base_url]
    statuses: dict[int, int] = {}
    deadline = time.monotonic() + 600
    while sum(statuses.values()) < total and time.monotonic() < deadline:
        out = subprocess.run(
            [*argv, "--", *args], capture_output=True, text=True, check=True, timeout=chunk + 60
        )
        for code, n in re.findall(r"^status (\d+) (\d+)$", out.stdout, re.M):
            statuses[int(code)] = statuses.get(int(code), 0) + int(n)
    return statuses


def settle(
    address: str, before: tuple[int, int], keys_before: set[str], *, timeout: float
) -> tuple[int, int]:
    """Wait for the drainers and the short lifetimes; memcached's (items, bytes) then."""
    wait_drained(address, timeout=timeout, what="the drainers to catch up")

    def back() -> bool:
        items, size = memory(address)
        return items <= before[0] + BOUND_ITEMS and size <= before[1] + BOUND_BYTES

    try:
        wait_for(back, timeout=timeout, interval=1, what="memory back within the bound")
    except TimeoutError as exc:
        raise AssertionError(
            f"{exc}: new keys by family {new_keys_by_family(address, keys_before)}"
        ) from None
    return memory(address)


def new_keys_by_family(address: str, keys_before: set[str]) -> dict[str, object]:
    """What is left that was not there at rest: a count per family and a few
    keys of each with their seconds to live (None: never expires) and the
    start of their values."""
    from demofarm.keyspace import family_of

    now = time.time()
    left: dict[str, list] = {}
    for item in keyspace.items(address, f"{NAMESPACE}:"):
        key = item.key.removeprefix(f"{NAMESPACE}:")
        if key in keys_before:
            continue
        family = family_of(key)
        left.setdefault(family.name if family else "unknown", []).append((key, item.ttl(now)))
    with keyspace.raw_client(address, NAMESPACE) as client:
        found: dict[str, object] = {
            name: (len(keys), [(k, ttl, (client.get(k) or b"")[:48]) for k, ttl in sorted(keys)[:6]])
            for name, keys in left.items()
        }
        # Where each queue's floor, head and tail stand: a floor that stopped is what keeps entries.
        for item in keyspace.items(address, f"{NAMESPACE}:"):
            base = item.key.removeprefix(f"{NAMESPACE}:")
            if base.endswith(":gen"):
                gen = (client.get(base) or b"").decode(errors="replace")
                counters = [client.get(f"{base[:-4]}:{gen}:{c}") for c in ("floor", "head", "tail")]
                found[f"counters {base[:-4]}"] = [c.decode() if c else None for c in counters]
        return found


def soak_farm(workdir: Path, started: list[processes.Process]) -> tuple[str, dict, str]:
    """A -M memcached, a worker, beat and a web node with the soak's settings:
    memcached's address, the environment and the node's URL."""
    mc, address = processes.memcached(workdir, memory_mb=256, extra=["-M"])
    started.append(mc)
    env = soak_env(workdir, address)
    processes.migrated_and_seeded(env)
    started.append(processes.celery_worker(env, workdir, "soak-worker"))
    started.append(processes.celery_beat(env, workdir, "soak-beat"))
    web, base_url = processes.gunicorn(env, workdir, "soak-node")
    started.append(web)
    return address, env, base_url
