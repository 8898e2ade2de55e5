"""Progress endpoint under wrk, beside a bare view reading one memcached key.

Both run in the same gunicorn, against the same memcached, in the same run:
the ratio is what the endpoint's session, auth, ownership check, JSON and
ETag cost over the floor. The job is kept running by a publisher process,
as a worker keeps a report's record beating, so the record and the document
the polls read are live, as on a farm.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from tests.harness import processes

DURATION = os.environ.get("BENCH_DURATION", "8s")
CONNECTIONS = os.environ.get("BENCH_CONNECTIONS", "32")
THREADS = "2"
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))


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
from webfarm.core.client import get_client
from progress import store
get_client().set("bench:bare", store.read_public({job!r}, {token!r}))
"""
    processes.manage(env, "shell", "-c", copy)
    return job, token, session


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
    if not shutil.which("wrk"):
        sys.exit("wrk is missing: `make bench` installs it")
    workdir = Path(tempfile.mkdtemp(prefix="bench-endpoint-"))
    with processes.stopped_after(workdir) as started:
        mc, address = processes.memcached(workdir)
        started.append(mc)
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "bench.settings",
            "DATABASE_URL": f"sqlite:///{workdir / 'bench.sqlite3'}",
            "MEMCACHED_SERVERS": address,
            "MEMCACHED_NAMESPACE": "bench",
            "DJANGO_SECRET_KEY": uuid.uuid4().hex,
            "LOG_LEVEL": "WARNING",
        }
        processes.manage(env, "migrate", "--no-input", "-v", "0")
        job, token, session = _live_job(env, workdir, started)
        web, base = processes.gunicorn(env, workdir, "bench-web")
        started.append(web)
        cookie = f"Cookie: sessionid={session}"
        by_token = f"{base}/progress/{job}/{token}/"
        rows = [
            ("bare view, one memcached get", (f"{base}/bench/bare/",)),
            ("GET /progress/<job>/ (session)", (f"{base}/progress/{job}/", cookie)),
            # The read-token URL through Django: as `make run` serves it (one get), and
            # as nginx's fall-back after a miss (the record read, the document put back).
            ("GET /progress/<job>/<token>/", (by_token,)),
            ("  same, as nginx's miss (republishes)", (by_token, "X-Progress-Missed: 1")),
        ]
        _wrk(f"{base}/bench/bare/")  # warm up
        runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in rows}
        # Rounds, each row once per round: a run's 32 connections may land
        # unevenly on the 2 gunicorn processes, which halves a run's rate now
        # and then; the median of the rounds is what a row costs.
        for _ in range(ROUNDS):
            for name, args in rows:
                runs[name].append(_wrk(*args))
        return [(name, _median(runs[name])) for name, _ in rows]


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    return sorted(runs, key=lambda r: r["rps"])[len(runs) // 2]


def report(results: list[tuple[str, dict[str, float]]]) -> str:
    floor = results[0][1]["rps"]
    lines = [
        f"Progress endpoint: wrk -t{THREADS} -c{CONNECTIONS} -d{DURATION}, "
        "gunicorn 2 workers x 2 threads, one memcached, a job kept running (a write every 0.25 s); "
        f"the median of {ROUNDS} interleaved rounds",
        f"{'':34} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'vs bare':>8}",
    ]
    for name, r in results:
        lines.append(f"{name:34} {r['rps']:9.0f} {r['p50']:8.2f} {r['p99']:8.2f} {r['rps'] / floor:8.2f}")
    return "\n".join(lines)
