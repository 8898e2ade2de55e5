"""The staff dashboard: what a page, a chart and the live part cost, cold
(computed) and warm (from get_or_set), beside a progress poll in the same
process as the baseline. Two days of counter history are generated first.
"""

import os
import tempfile
import uuid
from pathlib import Path

from tests.harness import processes

REPEAT = 21


def _measure(env: dict) -> str:
    script = f"""
import statistics, time
from datetime import UTC, datetime, timedelta
from django.contrib.auth import get_user_model
from django.test import Client
from webfarm.progress import services
from webfarm.stats.models import CounterMinute, CounterSample
now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
states = ("queued", "running", "succeeded", "failed")
keys = [f"jobs|kind=k{{k}}|state={{s}}" for k in range(3) for s in states]
keys += [f"job_seconds|kind=k0|le={{b}}" for b in (1, 5, 10, 30, 60)]
keys += ["progress_polls", "refused|reason=reports-user"]
CounterSample.objects.bulk_create(
    [CounterSample(key=k, hour=now - timedelta(hours=h), value=h + 1) for k in keys for h in range(48)]
)
CounterMinute.objects.bulk_create(
    [CounterMinute(key="progress_polls", minute=now - timedelta(minutes=m), value=m) for m in range(120)]
)
staff = get_user_model().objects.create_user("staff", password="x", is_staff=True)
job = services.create_job(owner=staff, kind="sales-by-region", title="bench", params={{}})
client = Client(HTTP_HOST="127.0.0.1")
client.force_login(staff)

def timed(path):
    started = time.perf_counter()
    response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    return (time.perf_counter() - started) * 1000

for name, path in [("poll", f"/progress/{{job.id}}/"), ("page", "/admin/dashboard/"),
                   ("chart", "/admin/dashboard/charts/jobs.png"), ("live", "/admin/dashboard/live/")]:
    cold = timed(path)
    warm = statistics.median(timed(path) for _ in range({REPEAT}))
    print("RESULT", name, round(cold, 2), round(warm, 2))
"""
    return processes.manage(env, "shell", "-c", script)


def run() -> dict[str, tuple[float, float]]:
    workdir = Path(tempfile.mkdtemp(prefix="bench-dashboard-"))
    mc, address = processes.memcached(workdir)
    try:
        env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{workdir / 'bench.sqlite3'}",
            "MEMCACHED_SERVERS": address,
            "MEMCACHED_NAMESPACE": "bench",
            "DJANGO_SECRET_KEY": uuid.uuid4().hex,
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
            "LOG_LEVEL": "WARNING",
        }
        processes.manage(env, "migrate", "--no-input", "-v", "0")
        out = _measure(env)
    finally:
        mc.stop()
    results = {}
    for line in out.splitlines():
        if line.startswith("RESULT "):
            _, name, cold, warm = line.split()
            results[name] = (float(cold), float(warm))
    return results


def report(results: dict[str, tuple[float, float]]) -> str:
    poll = results["poll"][1]
    lines = [
        f"Dashboard: Django test client in one process, 48 h of history, median of {REPEAT} warm requests",
        f"{'':28} {'cold ms':>9} {'warm ms':>9} {'warm vs poll':>13}",
    ]
    labels = {
        "poll": "GET /progress/<job>/",
        "page": "the dashboard page",
        "chart": "a chart (PNG)",
        "live": "the live part",
    }
    for name, label in labels.items():
        cold, warm = results[name]
        lines.append(f"{label:28} {cold:9.1f} {warm:9.1f} {warm / poll:12.1f}x")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run()))
