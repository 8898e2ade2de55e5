"""With DEBUG off, the web, worker and beat processes refuse to start on the
built-in or the example file's placeholder DJANGO_SECRET_KEY, or a weak one,
saying why."""

import os

import pytest

from tests import processes
from tests.processes import BIN, wait_for

pytestmark = pytest.mark.farm

PLACEHOLDERS = {
    "unset": None,
    "built-in": "dev-only-insecure-key-change-me-in-production-0123456789",
    "example file": "change-me-to-50-random-characters",
}
# Keys anyone could guess: judged by the same code in every process, so started as web only.
WEAK = {"one character": "x", "31 characters": "0123456789abcdef0123456789abcde", "one letter": "a" * 60}
COMMANDS = {
    "web": [str(BIN / "gunicorn"), "webfarm.wsgi", "-b", "127.0.0.1:{port}", "-w", "1"],
    "worker": [
        str(BIN / "celery"),
        "-A",
        "webfarm",
        "worker",
        "-c",
        "1",
        "--without-gossip",
        "--without-mingle",
    ],
    "beat": [str(BIN / "celery"), "-A", "webfarm", "beat", "--schedule", "{dir}/beat.db"],
}


def _env(tmp_path, key: str | None, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SECRET_KEY", "DJANGO_DEBUG")}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", CELERY_BROKER_URL="memory://", **extra)
    if key is not None:
        env["DJANGO_SECRET_KEY"] = key
    return env


@pytest.mark.parametrize(
    ("process", "key"),
    [(p, PLACEHOLDERS[k]) for p in sorted(COMMANDS) for k in sorted(PLACEHOLDERS)]
    + [("web", WEAK[k]) for k in sorted(WEAK)],
)
def test_a_placeholder_or_weak_secret_key_stops_the_process_with_a_reason(tmp_path, process, key):
    argv = [a.format(port=processes.free_port(), dir=tmp_path) for a in COMMANDS[process]]
    started = processes.Process(process, argv, log_dir=tmp_path, env=_env(tmp_path, key))
    started.start()
    try:
        wait_for(lambda: not started.alive(), timeout=60, what=f"{process} to refuse")
        assert started.proc.returncode != 0
        assert f"webfarm {process}: refusing to start: DJANGO_SECRET_KEY" in started.log()
    finally:
        started.stop()


def test_with_debug_on_or_a_real_key_the_processes_start(tmp_path):
    for env in (_env(tmp_path, None, DJANGO_DEBUG="1"), _env(tmp_path, "a-real-key-" + "k" * 40)):
        web, _ = processes.gunicorn(env, tmp_path, "web-ok")
        web.stop()


@pytest.mark.parametrize("process", sorted(COMMANDS))
def test_a_configuration_error_stops_the_process_with_the_reason(tmp_path, process):
    """System checks run in gunicorn and Celery too, not only in manage.py."""
    argv = [a.format(port=processes.free_port(), dir=tmp_path) for a in COMMANDS[process]]
    env = _env(tmp_path, "a-real-key-" + "k" * 40, MEMCACHED_NAMESPACE="two words")
    started = processes.Process(process, argv, log_dir=tmp_path, env=env)
    started.start()
    try:
        wait_for(lambda: not started.alive(), timeout=60, what=f"{process} to refuse")
        assert started.proc.returncode != 0
        log = started.log()
        assert f"webfarm {process}: refusing to start, the configuration has errors" in log
        assert "'two words'" in log and "core.E002" in log
    finally:
        started.stop()
