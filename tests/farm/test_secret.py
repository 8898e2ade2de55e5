"""With DEBUG off, the web, worker and beat processes refuse to start on the
built-in or the example file's placeholder DJANGO_SECRET_KEY, or a weak one,
saying why; a machine key file others may read is made private, or refused."""

import os
import secrets

import pytest

from tests.harness import processes
from tests.harness.processes import BIN, wait_for

pytestmark = pytest.mark.farm

PLACEHOLDERS = {
    # Unset, where this machine's key file can be neither read nor made: the dev key is left.
    "unset, no key file": None,
    "built-in": "dev-only-insecure-key-change-me-in-production-0123456789",
    "example file": "change-me-to-50-random-characters",
}
# Keys anyone could guess: judged by the same code in every process, so started as web only.
WEAK = {
    "one character": "x",
    "31 characters": "0123456789abcdef0123456789abcde",
    "one letter": "a" * 60,
    "a word repeated": "password" * 4,
}
# A key as `secrets.token_urlsafe(50)` makes one (the docs' way).
REAL_KEY = secrets.token_urlsafe(50)
COMMANDS = {
    "web": [str(BIN / "gunicorn"), "demofarm.wsgi", "-b", "127.0.0.1:{port}", "-w", "1"],
    "worker": [
        str(BIN / "celery"),
        "-A",
        "demofarm",
        "worker",
        "-c",
        "1",
        "--without-gossip",
        "--without-mingle",
    ],
    "beat": [str(BIN / "celery"), "-A", "demofarm", "beat", "--schedule", "{dir}/beat.db"],
}


def _env(tmp_path, key: str | None, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SECRET_KEY", "DJANGO_DEBUG")}
    env.update(
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        CELERY_BROKER_URL="memory://",
        DJANGO_SECRET_KEY_FILE="/proc/webfarm-cannot-make-this/secret_key",
    )
    env.update(extra)
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


def test_with_debug_on_a_real_key_or_this_machines_key_the_processes_start(tmp_path):
    key_file = tmp_path / "var" / "secret_key"
    for env in (
        _env(tmp_path, None, DJANGO_DEBUG="1"),
        _env(tmp_path, REAL_KEY),
        _env(tmp_path, "", DJANGO_SECRET_KEY_FILE=str(key_file)),  # "": unset (the tests' own key not given)
    ):
        web, _ = processes.gunicorn(env, tmp_path, "web-ok")
        web.stop()
    # The machine's key was made for it, readable by its owner only.
    assert len(key_file.read_text().strip()) >= 50 and key_file.stat().st_mode & 0o777 == 0o600


def test_a_key_file_others_may_read_is_made_private_with_a_warning(tmp_path):
    key_file = tmp_path / "var" / "secret_key"
    key_file.parent.mkdir()
    key_file.write_text(REAL_KEY)
    key_file.chmod(0o644)
    web, _ = processes.gunicorn(
        _env(tmp_path, "", DJANGO_SECRET_KEY_FILE=str(key_file)), tmp_path, "web-open"
    )
    web.stop()
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert f"warning: {key_file} (the secret key) could be read by others (mode 0644)" in web.log()


def test_this_machines_key_is_refused_by_a_farm_on_several_machines(settings, capsys):
    """Unset, the key is this machine's own: a process whose memcached,
    database or broker is elsewhere would disagree with every other machine."""
    from demofarm.secret import other_machines, refuse_placeholder

    settings.SECRET_KEY_FROM_FILE = True
    settings.SECRET_KEY = REAL_KEY
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": ["127.0.0.1:11211", "[::1]:11212"]}
    assert other_machines() == []
    refuse_placeholder("web")  # one machine: it starts
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": ["127.0.0.1:11211", "cache-2.internal:11211"]}
    assert other_machines() == ["cache-2.internal"]
    with pytest.raises(SystemExit):
        refuse_placeholder("web")
    assert "this farm is not on this machine alone (cache-2.internal)" in capsys.readouterr().err
    settings.SECRET_KEY_FROM_FILE = False  # set by the variable: the farm's own business
    refuse_placeholder("web")


@pytest.mark.parametrize("process", sorted(COMMANDS))
def test_a_configuration_error_stops_the_process_with_the_reason(tmp_path, process):
    """System checks run in gunicorn and Celery too, not only in manage.py."""
    argv = [a.format(port=processes.free_port(), dir=tmp_path) for a in COMMANDS[process]]
    env = _env(tmp_path, REAL_KEY, MEMCACHED_NAMESPACE="two words")
    started = processes.Process(process, argv, log_dir=tmp_path, env=env)
    started.start()
    try:
        wait_for(lambda: not started.alive(), timeout=60, what=f"{process} to refuse")
        assert started.proc.returncode != 0
        log = started.log()
        assert f"webfarm {process}: refusing to start, the configuration has errors" in log
        assert "'two words'" in log and "webfarm_core.E002" in log
    finally:
        started.stop()
