"""Progress endpoint under wrk, beside a bare view reading one memcached key.

Both run in the same gunicorn, against the same memcached, in the same run:
the ratio is what the endpoint's session, auth, ownership check, JSON and
ETag cost over the floor.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from tests import processes

DURATION = os.environ.get("BENCH_DURATION", "8s")
CONNECTIONS = os.environ.get("BENCH_CONNECTIONS", "32")
THREADS = "2"


def _setup(env: dict) -> tuple[str, str, str]:
    """A user, a running job with progress, its read token, and a logged-in session cookie."""
    script = """
from django.contrib.auth import get_user_model
from django.test import Client
from progress import services
from core.client import get_client
user = get_user_model().objects.create_user("bench", password="bench-password")
job = services.create_job(owner=user, kind="sales-by-region", title="bench", params={})
record = services.begin_job(job.id)
record.current, record.total, record.percent, record.stage = 1234, 10000, 12.3, "reading orders"
from progress import store
store.write(record)
get_client().set("bench:bare", store.read_raw(job.id))
client = Client()
client.force_login(user)
print(job.id, job.read_token, client.cookies["sessionid"].value)
"""
    out = processes.manage(env, "shell", "-c", script)
    job, token, session = out.split()[-3:]
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
        job, token, session = _setup(env)
        web, base = processes.gunicorn(env, workdir, "bench-web")
        started.append(web)
        cookie = f"Cookie: sessionid={session}"
        etag = processes.requests.get(
            f"{base}/progress/{job}/", headers={"Cookie": f"sessionid={session}"}, timeout=5
        ).headers["ETag"]
        results = []
        # Warm up, then measure the floor and the endpoint back to back.
        _wrk(f"{base}/bench/bare/")
        results.append(("bare view, one memcached get", _wrk(f"{base}/bench/bare/")))
        results.append(("GET /progress/<job>/ (200)", _wrk(f"{base}/progress/{job}/", cookie)))
        results.append(
            (
                "GET /progress/<job>/ (304)",
                _wrk(f"{base}/progress/{job}/", cookie, f"If-None-Match: {etag}"),
            )
        )
        # The read-token URL through Django: as `make run` serves it (one get), and
        # as nginx's fall-back after a miss (a get and an add that publishes it again).
        by_token = f"{base}/progress/{job}/{token}/"
        results.append(("GET /progress/<job>/<token>/", _wrk(by_token)))
        results.append(("  same, as nginx's miss (republishes)", _wrk(by_token, "X-Progress-Missed: 1")))
        return results


def report(results: list[tuple[str, dict[str, float]]]) -> str:
    floor = results[0][1]["rps"]
    lines = [
        f"Progress endpoint: wrk -t{THREADS} -c{CONNECTIONS} -d{DURATION}, "
        "gunicorn 2 workers x 2 threads, one memcached",
        f"{'':34} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'vs bare':>8}",
    ]
    for name, r in results:
        lines.append(f"{name:34} {r['rps']:9.0f} {r['p50']:8.2f} {r['p99']:8.2f} {r['rps'] / floor:8.2f}")
    return "\n".join(lines)
