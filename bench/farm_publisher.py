"""Keep N jobs running for bench.farm: `python -m bench.farm_publisher N OUT`.

Creates a user and N jobs, moves them to running, writes the jobs, their
read tokens and a session cookie to OUT as JSON, then advances every job
through the same ProgressReporter a report task uses (a write per job every
PROGRESS_FLUSH_INTERVAL, each publishing the fast path's document) until it
is stopped. The count of writes so far is kept in OUT.writes.
"""

import json
import os
import signal
import sys
import time
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demofarm.settings")
django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.test import Client  # noqa: E402

from webfarm.progress import services  # noqa: E402
from webfarm.progress.reporter import ProgressReporter  # noqa: E402

# Seconds between rounds over the jobs: a reporter writes only when its flush is due.
ROUND = 0.02


def main(count: int, out: Path) -> None:
    user = get_user_model().objects.create_user("bench-farm")  # logged in below, no password
    jobs = [
        services.create_job(owner=user, kind="sales-by-region", title=f"bench {n}", params={})
        for n in range(count)
    ]
    reporters = [ProgressReporter(services.begin_job(job), heartbeat_interval=3600) for job in jobs]
    client = Client()
    client.force_login(user)
    out.write_text(
        json.dumps(
            {
                "jobs": [[job.id, job.read_token] for job in jobs],
                "session": client.cookies["sessionid"].value,
            }
        )
    )
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    writes = out.with_suffix(".writes")
    step, last_report = 0, 0.0
    while not stopping:
        step += 1
        for reporter in reporters:
            reporter.update(step, total=10**9)
        now = time.monotonic()
        if now - last_report >= 0.5:
            writes.write_text(str(sum(r.flushes for r in reporters)))
            last_report = now
        time.sleep(ROUND)
    writes.write_text(str(sum(r.flushes for r in reporters)))


if __name__ == "__main__":
    main(int(sys.argv[1]), Path(sys.argv[2]))
