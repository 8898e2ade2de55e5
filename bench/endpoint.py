"""Progress polls under wrk, beside celery-progress 0.5's and a bare view.

The baseline is celery-progress's endpoint as a team runs it: a
`django-admin startproject` site (bench/celeryprogress) with its default
middleware, results in Redis, a task halfway through. Ours run in the same
gunicorn set-up, twice: with the poll gate (webfarm.progress.pollgate, the site's
default) and without it (PROGRESS_POLL_GATE=0: Django's whole chain). The
bare view reading one memcached key through Django is the floor.

The job is kept running by a publisher process, as a worker keeps a
report's record beating, so the record and the document the polls read are
live, as on a farm. The 304 rows poll a queued job, whose document does
not change, with the ETag its last answer gave.
"""

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import requests

from bench import stage
from tests.harness import processes

DURATION = os.environ.get("BENCH_DURATION", "8s")
CONNECTIONS = os.environ.get("BENCH_CONNECTIONS", "32")
THREADS = "2"
ROUNDS = stage.ROUNDS
# Every site's gunicorn: as `make run` serves (Procfile), and as docs/benchmarks.md measured.
SERVER = {"workers": 3, "threads": 4}
TOKEN = uuid.uuid4().hex


def _live_job(env: dict, workdir: Path, started: list) -> tuple[str, str, str]:
    """A job kept running by a publisher process, as a worker keeps a report's
    record beating (bench.farm_publisher); its id, read token and a session
    of its owner. The bare view's key holds a copy of its public document."""
    state = workdir / "publisher.json"
    argv = [sys.executable, "-m", "bench.farm_publisher", "1", str(state)]
    publisher = processes.Process("publisher", argv, log_dir=workdir, env=env).start()
    started.append(publisher)
    processes.wait_for(
        lambda: state.with_suffix(".writes").exists() or not publisher.alive(), timeout=120, what="publisher"
    )
    assert publisher.alive(), publisher.log()
    published = json.loads(state.read_text())
    (job, token), session = published["jobs"][0], published["session"]
    copy = f"""
from django.contrib.auth import get_user_model
from webfarm.core.client import get_client
from webfarm.progress import services, store
get_client().set("bench:bare", store.read_public({job!r}, {token!r}))
owner = get_user_model().objects.get(username="bench-farm")
still = services.create_job(owner=owner, kind="sales-by-region", title="still", params={{}})
print(still.id, still.read_token)
"""
    still = processes.manage(env, "shell", "-c", copy).split()
    return job, token, session, still[-2], still[-1]


def _baseline(workdir: Path, started: list) -> str:
    """celery-progress's URL for a task halfway through, on a gunicorn of its own."""
    redis, redis_url = processes.redis(workdir)
    started.append(redis)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.celeryprogress.settings",
        "DJANGO_SECRET_KEY": uuid.uuid4().hex,
        "BENCH_SQLITE": str(workdir / "celeryprogress.sqlite3"),
        "BENCH_REDIS_URL": redis_url,
    }
    processes.manage(env, "migrate", "--no-input", "-v", "0")
    task_id = str(uuid.uuid4())
    subprocess.run(
        [sys.executable, "-m", "bench.celeryprogress.seed", task_id],
        env=env,
        cwd=processes.ROOT,
        check=True,
        timeout=60,
    )
    url = f"/celery-progress/{task_id}/"
    web, base = processes.gunicorn(
        env,
        workdir,
        "celery-progress",
        app="bench.celeryprogress.wsgi",
        ready_path=url,
        access_log=False,
        **SERVER,
    )
    started.append(web)
    return base + url


def _etag(url: str, *headers: str) -> str:
    sent = dict(header.split(": ", 1) for header in headers)
    return requests.get(url, headers=sent, timeout=10).headers["ETag"]


def _wrk(url: str, *headers: str) -> dict[str, float]:
    argv = ["wrk", "-t", THREADS, "-c", CONNECTIONS, "-d", DURATION, "--latency", url]
    for header in headers:
        argv += ["-H", header]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=300).stdout
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non_2xx:
        raise RuntimeError(f"{url}: {non_2xx.group(1)} error responses\n{out}")
    return wrk_stats(out)


def wrk_stats(out: str) -> dict[str, float]:
    """Requests per second and latency percentiles from wrk --latency output."""

    def ms(label: str) -> float:
        value, unit = re.search(rf"\s{label}\s+([\d.]+)(us|ms|s)", out).groups()
        return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]

    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
        "p50": ms("50%"),
        "p99": ms("99%"),
    }


def run() -> list[tuple[str, dict[str, float]]]:
    stage.need_wrk()
    with stage.farm("bench-endpoint") as (workdir, started, address):
        env = stage.site_env(
            address, DATABASE_URL=f"sqlite:///{workdir / 'bench.sqlite3'}", STATS_API_TOKEN=TOKEN
        )
        processes.manage(env, "migrate", "--no-input", "-v", "0")
        job, token, session, still, still_token = _live_job(env, workdir, started)
        celery_progress = _baseline(workdir, started)
        web, base = processes.gunicorn(env, workdir, "bench-web", access_log=False, **SERVER)
        started.append(web)
        plain, plain_base = processes.gunicorn(
            {**env, "PROGRESS_POLL_GATE": "0"}, workdir, "bench-web-plain", access_log=False, **SERVER
        )
        started.append(plain)
        floor, floor_base = processes.gunicorn(
            env, workdir, "bench-floor", app="bench.floor_wsgi", ready_path="/", access_log=False, **SERVER
        )
        started.append(floor)
        cookie = f"Cookie: sessionid={session}"
        by_token = f"/progress/{job}/{token}/"
        still_token_url = f"{base}/progress/{still}/{still_token}/"
        still_session_url = f"{base}/progress/{still}/"
        rows = [
            ("celery-progress 0.5 (Redis)", (celery_progress,)),
            ("bare view, one memcached get", (f"{base}/bench/bare/",)),
            ("WSGI floor: one get, no Django", (f"{floor_base}/",)),
            # The read-token URL: as `make run` serves it (one get), and as
            # nginx's fall-back after a miss (the record read, the document put back).
            ("GET /progress/<job>/<token>/", (base + by_token,)),
            ("  token, without the gate", (plain_base + by_token,)),
            ("  as nginx's miss (republishes)", (base + by_token, "X-Progress-Missed: 1")),
            ("GET /progress/<job>/ (session)", (f"{base}/progress/{job}/", cookie)),
            ("  session, without the gate", (f"{plain_base}/progress/{job}/", cookie)),
            ("304, token", (still_token_url, f"If-None-Match: {_etag(still_token_url)}")),
            (
                "304, session",
                (still_session_url, cookie, f"If-None-Match: {_etag(still_session_url, cookie)}"),
            ),
            # Prometheus's scrape: 10 scrapers once a second cost 10 / this rate of the node.
            ("GET /stats/metrics (scrapes)", (f"{base}/stats/metrics", f"Authorization: Bearer {TOKEN}")),
        ]
        for url in (celery_progress, f"{base}/bench/bare/", plain_base + by_token):
            _wrk(url)  # warm up
        runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in rows}
        # Rounds, each row once per round: a run's 32 connections may land
        # unevenly on the 2 gunicorn processes, which halves a run's rate now
        # and then; the median of the rounds is what a row costs.
        for _ in range(ROUNDS):
            for name, args in rows:
                runs[name].append(_wrk(*args))
        return [(name, stage.median(runs[name], by="rps")) for name, _ in rows]


def report(results: list[tuple[str, dict[str, float]]]) -> str:
    baseline, floor = results[0][1]["rps"], results[1][1]["rps"]
    lines = [
        f"Progress polls: wrk -t{THREADS} -c{CONNECTIONS} -d{DURATION}, "
        "gunicorn 3 workers x 4 threads each site (no access log, gunicorn's default), one memcached, "
        f"a job kept running (a write every 0.25 s); the median of {ROUNDS} interleaved rounds",
        f"{'':34} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'vs c-p':>8} {'vs bare':>8}",
    ]
    for name, r in results:
        lines.append(
            f"{name:34} {r['rps']:9.0f} {r['p50']:8.2f} {r['p99']:8.2f} {r['rps'] / baseline:8.2f}"
            f" {r['rps'] / floor:8.2f}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run()))
