"""Load shedding under a flood of report starts, through gunicorn and wrk.

Many users start reports at once. Per-user and per-report-type limits hold;
what the farm does with the rest is answer 503 + Retry-After at once. In one
run: a flood from empty (accepted vs refused), then the same flood when every
slot is taken (refusals only: their latency), beside an authenticated
progress poll (the cheapest real request) as the baseline, made by a wrk Lua
script as the starts are, so the load generator costs the same for both.
"""

import os
import re
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import requests

from bench.endpoint import CONNECTIONS, ROUNDS, THREADS, _median, wrk_stats
from tests.harness import processes

DURATION = os.environ.get("BENCH_DURATION", "8s")
USERS = 300
PER_USER, PER_KIND = 2, 4  # the defaults
CSRF = "benchcsrfbenchcsrfbenchcsrfbench"
LUA = Path(__file__).with_name("flood.lua")


def _sessions(env: dict, count: int) -> list[str]:
    """Users without passwords (hashing 300 would take minutes), logged in."""
    script = f"""
from django.contrib.auth import get_user_model
from django.test import Client
User = get_user_model()
users = User.objects.bulk_create([User(username=f"flood{{i}}") for i in range({count})])
for user in User.objects.filter(username__startswith="flood"):
    client = Client()
    client.force_login(user)
    print("SESSION", client.cookies["sessionid"].value)
"""
    return re.findall(r"SESSION (\S+)", processes.manage(env, "shell", "-c", script))


def _flood(base: str, sessions_file: Path, poll: str | None = None) -> dict:
    """Starts by many users (flood.lua), or with `poll` that path, GET."""
    argv = ["wrk", "-t", THREADS, "-c", CONNECTIONS, "-d", DURATION, "--latency", "-s", str(LUA), base]
    args = [str(sessions_file), *([poll] if poll else [])]
    out = subprocess.run([*argv, "--", *args], capture_output=True, text=True, check=True, timeout=300).stdout
    counts = dict(re.findall(r"(accepted|refused|other)=(\d+)", out))
    seconds = float(DURATION.rstrip("s"))
    return {
        **wrk_stats(out),
        "accepted": int(counts["accepted"]),
        "refused": int(counts["refused"]),
        "other": int(counts["other"]),
        "accepted_per_s": int(counts["accepted"]) / seconds,
        "refused_per_s": int(counts["refused"]) / seconds,
    }


def _polls(base: str, sessions_file: Path, path: str) -> dict:
    """The baseline: progress polls made by flood.lua as the starts are, so
    that wrk, on the same two cores, costs the same for both."""
    polled = _flood(base, sessions_file, path)
    if polled["other"] or polled["refused"]:
        raise RuntimeError(f"{polled['other'] + polled['refused']} polls were not answered 200")
    return polled


def _headers(session: str) -> dict[str, str]:
    return {
        "Cookie": f"sessionid={session}; csrftoken={CSRF}",
        "X-CSRFToken": CSRF,
        "Accept": "application/json",
    }


def _one_start_ms(base: str, session: str, expect: int) -> float:
    """One start request, alone; an accepted job is cancelled at once (a
    queued job ends when cancelled, and gives its slots back)."""
    started = time.perf_counter()
    response = requests.post(
        f"{base}/reports/return-rates/",
        data={"date_from": "2024-01-01", "date_to": "2025-12-31", "min_units": 1},
        headers=_headers(session),
        timeout=10,
    )
    elapsed = (time.perf_counter() - started) * 1000
    assert response.status_code == expect, response.text
    if expect == 202:
        job = response.json()["job"]
        requests.post(
            f"{base}/progress/{job}/cancel/", headers=_headers(session), timeout=10
        ).raise_for_status()
    return elapsed


def run() -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="bench-shedding-"))
    with processes.stopped_after() as started:
        mc, address = processes.memcached(workdir, memory_mb=256)
        started.append(mc)
        env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{workdir / 'bench.sqlite3'}",
            "MEMCACHED_SERVERS": address,
            "CELERY_BROKER_URL": "memcached://",  # no worker: accepted jobs wait, holding their slots
            "MEMCACHED_NAMESPACE": "bench",
            "DJANGO_SECRET_KEY": uuid.uuid4().hex,
            "LOG_LEVEL": "WARNING",
            "REPORTS_PER_USER": str(PER_USER),
            "REPORTS_PER_KIND": str(PER_KIND),
        }
        processes.manage(env, "migrate", "--no-input", "-v", "0")
        sessions = _sessions(env, USERS)
        sessions_file = workdir / "sessions.txt"
        sessions_file.write_text("\n".join(sessions[20:]) + "\n")
        web, base = processes.gunicorn(env, workdir, "bench-web")
        started.append(web)
        # A start that is accepted, alone (the type's slots are freed in between).
        accepted_ms = [_one_start_ms(base, session, 202) for session in sessions[:20]]
        jobs = requests.get(f"{base}/jobs/", headers={"Cookie": f"sessionid={sessions[0]}"}, timeout=5)
        job_id = re.search(r"/progress/([A-Za-z0-9_-]{22})/", jobs.text).group(1)
        flood = _flood(base, sessions_file)  # from every slot free
        refused_ms = [_one_start_ms(base, session, 503) for session in sessions[:20]]
        # Every slot taken: refusals only, beside the poll, in interleaved rounds
        # (a wrk run's connections may land unevenly on the two processes).
        owner_file = workdir / "owner.txt"  # the poll's job is the first user's: only it may poll it
        owner_file.write_text(sessions[0] + "\n")
        fulls, polls = [], []
        for _ in range(ROUNDS):
            fulls.append(_flood(base, sessions_file))
            polls.append(_polls(base, owner_file, f"/progress/{job_id}/"))
        full, poll = _median(fulls), _median(polls)
        return {
            "accepted_ms": statistics.median(accepted_ms),
            "refused_ms": statistics.median(refused_ms),
            "flood": flood,
            "full": full,
            "poll": poll,
        }


def report(r: dict) -> str:
    flood, full, poll = r["flood"], r["full"], r["poll"]
    return "\n".join(
        [
            f"Load shedding: {USERS} users flood report starts, "
            f"wrk -t{THREADS} -c{CONNECTIONS} -d{DURATION}, limits {PER_USER} per user / "
            f"{PER_KIND} per report type, gunicorn 2x2; refusals and polls: the median of {ROUNDS} rounds",
            f"alone: an accepted start p50 {r['accepted_ms']:.1f} ms, a refused one "
            f"{r['refused_ms']:.1f} ms (one look at both limits, refused at once)",
            f"{'':36} {'req/s':>8} {'accepted':>9} {'refused':>8} {'p50 ms':>8} {'p99 ms':>8}",
            f"{'flood, slots free at the start':36} {flood['rps']:8.0f} {flood['accepted']:9d} "
            f"{flood['refused']:8d} {flood['p50']:8.2f} {flood['p99']:8.2f}",
            f"{'flood, all slots taken (refusals)':36} {full['rps']:8.0f} {full['accepted']:9d} "
            f"{full['refused']:8d} {full['p50']:8.2f} {full['p99']:8.2f}",
            f"{'baseline: GET /progress/<job>/':36} {poll['rps']:8.0f} {'':9} {'':8} "
            f"{poll['p50']:8.2f} {poll['p99']:8.2f}",
            f"refusals vs progress polls: {full['rps'] / poll['rps']:.2f}x the rate, "
            f"{full['p50'] / poll['p50']:.2f}x the p50 latency; "
            f"refused {flood['refused_per_s']:.0f}/s while accepting {flood['accepted_per_s']:.1f}/s",
        ]
    )


if __name__ == "__main__":
    print(report(run()))
