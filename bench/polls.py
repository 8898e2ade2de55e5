"""Votes per second through gunicorn under wrk: the product's path (marker,
queue and running total in memcached) beside the same vote written straight
to the database, SQLite and PostgreSQL, in one run. Then how fast the
flusher moves the queued votes into PostgreSQL."""

import json
import re
import subprocess
import time
from pathlib import Path

import psycopg

from bench import stage
from bench.endpoint import CONNECTIONS, DURATION, ROUNDS, THREADS, wrk_stats
from tests.harness import processes

LUA = Path(__file__).with_name("votes.lua")


def _poll(env: dict) -> tuple[int, list[int]]:
    out = processes.manage(
        env,
        "shell",
        "-c",
        "import json; from demofarm.polls.models import Poll; p = Poll.objects.create(question='Bench?'); "
        "ids = [p.choices.create(text=t, position=i).id for i, t in enumerate('ABC')]; "
        "print(json.dumps([p.id, ids]))",
    )
    poll, choices = json.loads(out.strip().splitlines()[-1])
    return poll, choices


def _votes(base: str, path: str, choices: list[int]) -> dict:
    argv = ["wrk", "-t", THREADS, "-c", CONNECTIONS, "-d", DURATION, "--latency", "-s", str(LUA), base]
    out = subprocess.run(
        [*argv, "--", path, *map(str, choices)], capture_output=True, text=True, check=True, timeout=300
    ).stdout
    counts = dict(re.findall(r"(accepted|other)=(\d+)", out))
    return {
        **wrk_stats(out),
        "accepted": int(counts["accepted"]),
        "other": int(counts["other"]),
        "accepted_per_s": int(counts["accepted"]) / float(DURATION.rstrip("s")),
    }


def _node(workdir: Path, env: dict, name: str) -> tuple[processes.Process, str, int, list[int]]:
    processes.manage(env, "migrate", "--no-input", "-v", "0")
    poll, choices = _poll(env)
    web, base = processes.gunicorn(env, workdir, name)
    return web, base, poll, choices


def _count_votes(database_url: str, poll: int) -> int:
    with psycopg.connect(database_url) as db:
        return db.execute("SELECT count(*) FROM polls_vote WHERE poll_id = %s", (poll,)).fetchone()[0]


def run() -> dict:
    stage.need_wrk()
    with (
        processes.postgres_database("webfarm_bench") as database_url,
        stage.farm("bench-polls", memory_mb=256) as (workdir, started, address),
    ):
        # wrk votes from one address.
        base_env = stage.site_env(address, POLLS_ANONYMOUS_PER_ADDRESS="1000000000")
        postgres_env = {**base_env, "DATABASE_URL": database_url}
        sqlite_env = {**base_env, "DATABASE_URL": f"sqlite:///{workdir / 'bench.sqlite3'}"}
        results = {}
        # One node at a time, so each has the machine to itself.
        web, base, poll, choices = _node(workdir, postgres_env, "web-postgres")
        started.append(web)
        processes.manage(postgres_env, "flush_votes")  # the new poll's running totals
        _votes(base, f"/polls/{poll}/vote/", choices)  # warm-up (and a queue to flush below)
        # Interleaved rounds, the median of each: a wrk run's connections may
        # land unevenly on the two gunicorn processes now and then.
        memcached, postgres = [], []
        for _ in range(ROUNDS):
            memcached.append(_votes(base, f"/polls/{poll}/vote/", choices))
            postgres.append(_votes(base, f"/bench/polls/{poll}/vote/", choices))
        results["memcached"] = stage.median(memcached, by="accepted_per_s")
        results["postgres"] = stage.median(postgres, by="accepted_per_s")
        web.stop()
        queued = _count_votes(database_url, poll)
        started_at = time.perf_counter()
        processes.manage(postgres_env, "flush_votes")
        flush_seconds = time.perf_counter() - started_at
        flushed = _count_votes(database_url, poll) - queued
        web, base, poll, choices = _node(workdir, sqlite_env, "web-sqlite")
        started.append(web)
        _votes(base, f"/bench/polls/{poll}/vote/", choices)  # warm-up
        results["sqlite"] = _votes(base, f"/bench/polls/{poll}/vote/", choices)
        results["flush"] = {"votes": flushed, "seconds": flush_seconds}
        return results


def report(r: dict) -> str:
    floor = r["postgres"]["accepted_per_s"]
    lines = [
        f"Votes: new anonymous voter per request, wrk -t{THREADS} -c{CONNECTIONS} -d{DURATION}, "
        f"gunicorn 2 workers x 2 threads; memcached and PostgreSQL: the median of {ROUNDS} rounds",
        f"{'':40} {'votes/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} {'vs PG':>6}",
    ]
    rows = [
        ("memcached: marker, queue, running total", r["memcached"]),
        ("straight to PostgreSQL", r["postgres"]),
        ("straight to SQLite", r["sqlite"]),
    ]
    for name, x in rows:
        lines.append(
            f"{name:40} {x['accepted_per_s']:8.0f} {x['p50']:8.2f} {x['p99']:8.2f} "
            f"{x['other']:7d} {x['accepted_per_s'] / floor:6.2f}"
        )
    flush = r["flush"]
    lines.append(
        f"flusher: {flush['votes']} queued votes into PostgreSQL in {flush['seconds']:.1f} s "
        f"(one manage.py run, start-up included): {flush['votes'] / flush['seconds']:.0f} votes/s"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run()))
