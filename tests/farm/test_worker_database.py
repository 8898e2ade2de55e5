"""A worker keeps its PostgreSQL connection across tasks (Celery closes it
after every task unless CELERY_DB_REUSE_MAX is set; a new connection was a
third of a short task's run), and a kept connection that the server dropped
is replaced at the next task's start, as Django replaces a request's
(demofarm/celery.py): no task fails for it."""

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.harness import processes

pytestmark = pytest.mark.farm

# Enqueues n tasks one after the other in a process of its own, each waited
# for: prints their statuses as one JSON line.
RUN_TASKS = """
import json, time
from webfarm.djangotasks.compat import task_backends
from tests.harness import django_tasks as tasks
backend = task_backends["default"]
statuses = []
for n in range({n}):
    result = tasks.divide.enqueue(n, 1)
    deadline = time.monotonic() + 60
    while not result.is_finished and time.monotonic() < deadline:
        time.sleep(0.02)
        result.refresh()
    statuses.append([str(result.status), [e.traceback for e in result.errors]])
print(json.dumps(statuses))
"""


@pytest.fixture(scope="module")
def site() -> Iterator[tuple[dict, str, processes.Process]]:
    workdir = Path(tempfile.mkdtemp(prefix="worker-db-"))
    with processes.stopped_after(workdir) as started, processes.postgres_database("workerdb") as database:
        memcached, address = processes.memcached(workdir)
        started.append(memcached)
        env = processes.with_secret_key(
            {
                **os.environ,
                "DATABASE_URL": database,
                "MEMCACHED_SERVERS": address,
                "MEMCACHED_NAMESPACE": "workerdb",
                "CELERY_BROKER_URL": f"memcached://{address}",
                "CELERY_TASK_DEFAULT_QUEUE": "workerdb",
            }
        )
        processes.manage(env, "migrate", "--no-input", "-v", "0")
        worker = processes.celery_worker(env, workdir, "worker-db", concurrency=1)
        started.append(worker)
        yield env, database, worker


def _run_tasks(env: dict, n: int) -> list:
    out = processes.manage(env, "shell", "--no-imports", "-c", RUN_TASKS.format(n=n))
    return json.loads(out.strip().splitlines()[-1])


def _worker_connections(database: str) -> list[int]:
    """The backends connected to the site's database, other than this one's:
    once the shells are gone, the worker's."""
    with psycopg.connect(database, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return [pid for (pid,) in rows]


def _worker_connection(database: str, *, not_: int | None = None) -> int:
    """The worker's one connection, once only it is left: a shell's backend
    ends a moment after the shell, and a terminated one after its kill (a
    CI run found two listed just after the tasks' shell had ended)."""
    try:
        found = processes.wait_for(
            lambda: (pids := _worker_connections(database)) and len(pids) == 1 and pids[0] != not_ and pids,
            timeout=10,
            what=f"one worker connection, not {not_}",
        )
    except TimeoutError as exc:
        raise AssertionError(f"{exc}: listed {_worker_connections(database)}") from exc
    return found[0]


def test_a_worker_keeps_its_connection_and_replaces_one_the_server_dropped(site):
    env, database, worker = site
    assert _run_tasks(env, 5) == [["SUCCESSFUL", []]] * 5
    # One process, one connection, still open after its tasks (Celery's default closes it).
    kept = _worker_connection(database)
    assert _run_tasks(env, 3) == [["SUCCESSFUL", []]] * 3
    assert _worker_connection(database) == kept

    # The server drops it (a restart, a pooler, an idle timeout): the next task reconnects.
    with psycopg.connect(database, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [kept])
    assert _run_tasks(env, 3) == [["SUCCESSFUL", []]] * 3
    _worker_connection(database, not_=kept)
    assert "Traceback" not in worker.log()
