"""Start the farm's real processes for tests: memcached, Redis, Celery, gunicorn."""

import atexit
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import requests
from pymemcache.client.base import Client

from tests.harness import ports

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


# A PostgreSQL server of the run's own, started on first use, stopped at exit.
_postgres: list = []


def postgres_bin() -> Path:
    """Where the OS packages put PostgreSQL's programs (make test installs them)."""
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists():
            return candidate
    raise RuntimeError("PostgreSQL is not installed: `make test` installs it from the OS packages")


def start_postgres(
    base: Path, *, listen: str, port: int, trust: str = "", wrap: Callable[[list[str]], list[str]] = list
) -> "Process":
    """A throwaway PostgreSQL cluster in `base` (fsync off), listening on
    `listen`:`port` and on a socket in `base`, with no password for local
    connections and for the network `trust` (a CIDR); `wrap` turns its
    command into the one to run (on a test host). Returns once it answers."""
    # PostgreSQL refuses to run as root: as root, run it as the postgres user.
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_user:
        shutil.chown(base, "postgres", "postgres")
    data, bin_dir = base / "data", postgres_bin()
    initdb = [str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8"]
    subprocess.run([*as_user, *initdb, "--no-sync"], check=True, capture_output=True, timeout=120)
    if trust:
        with open(data / "pg_hba.conf", "a") as hba:
            hba.write(f"host all all {trust} trust\n")
    argv = [*as_user, str(bin_dir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(base)]
    for option in (
        f"listen_addresses={listen}",
        "fsync=off",
        "synchronous_commit=off",
        "full_page_writes=off",
        "max_connections=300",
    ):
        argv += ["-c", option]
    process = Process("postgres", wrap(argv), log_dir=base).start()

    def ready() -> bool:
        # Over its socket: a file, reachable whatever network the server is on.
        with psycopg.connect(
            host=str(base), port=port, user="postgres", dbname="postgres", connect_timeout=1
        ):
            return True

    wait_for(lambda: ready() or not process.alive(), timeout=60, what="postgres")
    assert process.alive(), process.log()
    return process


def postgres_server() -> str:
    """The URL (without a database name) of this run's PostgreSQL server: a
    throwaway cluster on a free port, started on first use."""
    if _postgres:
        return _postgres[1]
    base = Path(tempfile.mkdtemp(prefix="webfarm-pg-"))
    port = free_port()
    process = start_postgres(base, listen="127.0.0.1", port=port)
    url = f"postgresql://postgres@127.0.0.1:{port}/"
    _postgres[:] = [process, url]
    atexit.register(_stop_postgres, process, base)
    return url


def _stop_postgres(process: "Process", base: Path) -> None:
    process.stop(signal.SIGINT)  # a fast shutdown: SIGTERM waits for every client to leave
    shutil.rmtree(base, ignore_errors=True)


@contextmanager
def postgres_database(prefix: str) -> Iterator[str]:
    """A new, empty PostgreSQL database for one farm: its URL; dropped after."""
    server = postgres_server()
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server + "postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield server + name
    finally:
        with psycopg.connect(server + "postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def free_port() -> int:
    return ports.free_port()


def wait_for(check: Callable[[], object], *, timeout: float, what: str, interval: float = 0.05) -> object:
    """Poll `check` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except Exception as exc:  # the thing may not be up yet
            last_error = exc
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what} (last error: {last_error})")


# The key this run's web, worker and beat processes share unless a test sets
# its own: they refuse to start on a placeholder (demofarm.secret).
RUN_SECRET_KEY = "test-run-" + uuid.uuid4().hex


def with_secret_key(env: dict | None) -> dict:
    env = dict(os.environ if env is None else env)
    env.setdefault("DJANGO_SECRET_KEY", RUN_SECRET_KEY)
    return env


def one_memcached_env(base: Path, address: str, name: str, **settings: object) -> dict:
    """The environment of a farm on one memcached (store and broker), its own
    SQLite database, namespace and Celery queue (`name`), demo accounts with the
    tests' password; `settings` add or override variables."""
    from tests.harness.web import DEMO_PASSWORD

    return {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{base / (name + '.sqlite3')}",
        "MEMCACHED_SERVERS": address,
        "CELERY_BROKER_URL": f"memcached://{address}",
        "CELERY_TASK_DEFAULT_QUEUE": name,
        "MEMCACHED_NAMESPACE": name,
        "DJANGO_SECRET_KEY": f"{name}-{uuid.uuid4().hex}",
        "DEMO_PASSWORD": DEMO_PASSWORD,
        "ACTIVITY_LOG_FILE": str(base / "activity.log"),
        **{key: str(value) for key, value in settings.items()},
    }


class Process:
    """A child process with its output in a log file, stopped on exit."""

    def __init__(
        self, name: str, argv: list[str], *, log_dir: Path, env: dict | None = None, cwd: Path = ROOT
    ) -> None:
        self.name = name
        self.cwd = cwd
        self.argv = argv
        self.log_path = log_dir / f"{name}.log"
        self.env = env
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Process":
        log = open(self.log_path, "ab")  # noqa: SIM115 (owned by the child)
        self.proc = subprocess.Popen(
            self.argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=self.cwd,
            start_new_session=True,
        )
        log.close()
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> None:
        if not self.alive():
            return
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)
        except ProcessLookupError:
            pass


@contextmanager
def stopped_after(scratch: Path | None = None) -> Iterator[list[Process]]:
    """A list for the processes a farm starts. On the way out, whatever
    happened, each is stopped, the newest first, and then the scratch
    directory they logged into (a benchmark's) is removed."""
    started: list[Process] = []
    try:
        yield started
    finally:
        for process in reversed(started):
            process.stop()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def memcached(
    log_dir: Path,
    *,
    port: int | None = None,
    memory_mb: int = 64,
    extra: list[str] | None = None,
    listen: str = "127.0.0.1",
    wrap: Callable[[list[str]], list[str]] = list,
) -> tuple[Process, str]:
    """memcached on `listen`; `wrap` turns its command into the one to run
    (on a test host: tests/harness/hosts.py)."""
    port = port or free_port()
    argv = [
        shutil.which("memcached") or "memcached",
        "-l",
        listen,
        "-p",
        str(port),
        "-U",
        "0",
        "-m",
        str(memory_mb),
        *(extra or []),
    ]
    if os.geteuid() == 0:
        argv += ["-u", "root"]
    process = Process(f"memcached-{port}", wrap(argv), log_dir=log_dir).start()
    address = f"{listen}:{port}"

    def answering_pid() -> int:
        client = Client((listen, port), connect_timeout=0.2, timeout=1)
        try:
            return client.stats()[b"pid"]
        finally:
            client.close()

    pid = wait_for(answering_pid, timeout=10, what=f"memcached on {address}")
    # The one that answers must be ours: if another process held the port,
    # ours failed to bind, and theirs answers for it.
    if not process.alive() or (wrap is list and pid != process.proc.pid):
        process.stop()
        raise RuntimeError(f"{address} is answered by memcached pid {pid}, not ours: {process.log()[-300:]}")
    return process, address


def redis(log_dir: Path) -> tuple[Process, str]:
    port = free_port()
    argv = [
        shutil.which("redis-server") or "redis-server",
        "--bind",
        "127.0.0.1",
        "--port",
        str(port),
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(log_dir),
    ]
    process = Process(f"redis-{port}", argv, log_dir=log_dir).start()

    def ping() -> bool:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")

    wait_for(ping, timeout=10, what=f"redis on port {port}")
    return process, f"redis://127.0.0.1:{port}/0"


def collect_static_files() -> None:
    """The site's static files into STATIC_ROOT, as `make setup` collects
    them: once a run, before the tests (tests/conftest.py), never by two
    farms at once while a third serves them."""
    manage(with_secret_key(None), "collectstatic", "--no-input", "-v", "0")


def manage(env: dict, *args: str) -> str:
    result = subprocess.run(
        [str(BIN / "python"), "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


def templates() -> Path:
    """Where this run keeps the databases it migrated and seeded once per
    dataset: named by the run's controller (tests/conftest.py) before its
    xdist workers start, so they inherit the name."""
    run = os.environ.setdefault("WEBFARM_TEST_RUN", uuid.uuid4().hex)
    return Path(tempfile.gettempdir()) / f"webfarm-test-db-{run}"


def migrated_and_seeded(env: dict) -> None:
    """`manage.py migrate` and `seed_demo` for env's database. A SQLite one
    is a copy of a template this run made once for the same dataset (the
    DEMO_ variables and the settings module): a farm's set-up is a file
    copy, not a migration and a dataset's generation, each about a tenth of
    a core-second per thousand orders (CONTRIBUTING.md, "Time")."""
    url = env.get("DATABASE_URL", "")
    if not url.startswith("sqlite:///"):
        _migrate_and_seed(env)
        return
    target = Path(url.removeprefix("sqlite:///"))
    dataset = sorted((k, v) for k, v in env.items() if k.startswith("DEMO_") or k == "DJANGO_SETTINGS_MODULE")
    made = templates() / hashlib.sha256(repr(dataset).encode()).hexdigest()[:16]
    made.mkdir(parents=True, exist_ok=True)
    with open(made / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another xdist worker may be making it
        if not (made / "done").exists():
            _migrate_and_seed({**env, "DATABASE_URL": f"sqlite:///{made / 'db.sqlite3'}"})
            (made / "done").touch()
    # SQLite in WAL mode: what a last checkpoint left in the log goes with the file.
    for suffix in ("", "-wal"):
        if (made / f"db.sqlite3{suffix}").exists():
            shutil.copyfile(made / f"db.sqlite3{suffix}", f"{target}{suffix}")


def _migrate_and_seed(env: dict) -> None:
    manage(env, "migrate", "--no-input", "-v", "0")
    manage(env, "seed_demo", "-v", "0")


def remove_templates() -> None:
    shutil.rmtree(templates(), ignore_errors=True)


def celery_worker(
    env: dict,
    log_dir: Path,
    name: str,
    *,
    concurrency: int = 2,
    include: str | None = None,
    queues: str | None = None,
    wrap: Callable[[list[str]], list[str]] = list,
) -> Process:
    """A real `celery worker` on env's broker and CELERY_TASK_DEFAULT_QUEUE
    (or `queues`, comma-separated), started and ready."""
    argv = [
        str(BIN / "celery"),
        "-A",
        "demofarm",
        "worker",
        "-l",
        "info",
        "-c",
        str(concurrency),
        "-n",
        f"{name}@%h",
        "-Q",
        queues or env["CELERY_TASK_DEFAULT_QUEUE"],
        "--without-gossip",
        "--without-mingle",
    ]
    if include:
        argv += ["--include", include]
    process = Process(name, wrap(argv), log_dir=log_dir, env=with_secret_key(env)).start()
    wait_for(
        lambda: " ready." in process.log() or not process.alive(), timeout=60, what=f"celery worker {name}"
    )
    assert process.alive(), process.log()
    return process


# gunicorn's default line, with the request's time in milliseconds.
ACCESS_LOG_FORMAT = '%(h)s %(t)s "%(r)s" %(s)s %(b)s %(M)sms'


def gunicorn(
    env: dict,
    log_dir: Path,
    name: str,
    *,
    port: int | None = None,
    app: str = "demofarm.wsgi",
    ready_path: str = "/accounts/login/",
    access_log: bool = True,
    workers: int = 2,
    threads: int = 2,
    listen: str = "127.0.0.1",
    wrap: Callable[[list[str]], list[str]] = list,
) -> tuple[Process, str]:
    """gunicorn -w 2 --threads 2 (or `workers` x `threads`) on a free port,
    started and answering; `access_log`: a line per request in its log
    (benchmarks leave it out, as gunicorn does by default)."""
    port = port or free_port()
    argv = [
        str(BIN / "gunicorn"),
        app,
        "-b",
        f"{listen}:{port}",
        "-w",
        str(workers),
        "--threads",
        str(threads),
        # Each line with its time in the server (ms): a slow answer shows
        # whether the time went inside the app or before it was reached.
        *(["--access-logfile", "-", "--access-logformat", ACCESS_LOG_FORMAT] if access_log else []),
        "--graceful-timeout",
        "5",
    ]
    process = Process(name, wrap(argv), log_dir=log_dir, env=with_secret_key(env)).start()
    base = f"http://{listen}:{port}"
    wait_for(
        lambda: requests.get(f"{base}{ready_path}", timeout=2).status_code == 200 or not process.alive(),
        timeout=60,
        what=f"gunicorn {name}",
    )
    assert process.alive(), process.log()
    return process, base


def celery_beat(
    env: dict, log_dir: Path, name: str = "beat", *, wrap: Callable[[list[str]], list[str]] = list
) -> Process:
    """A real `celery beat` sending the settings' periodic tasks on env's broker."""
    argv = [
        str(BIN / "celery"),
        "-A",
        "demofarm",
        "beat",
        "-l",
        "info",
        "--schedule",
        str(log_dir / f"{name}.db"),
    ]
    process = Process(name, wrap(argv), log_dir=log_dir, env=with_secret_key(env)).start()
    wait_for(lambda: "beat: Starting" in process.log() or not process.alive(), timeout=60, what="celery beat")
    assert process.alive(), process.log()
    return process


def nginx(
    log_dir: Path,
    *,
    web: list[str],
    memcached: list[str],
    namespace: str,
    access_log: bool = False,
    hosts: tuple[str, ...] = ("127.0.0.1", "localhost", "[::1]"),
    refused_agents: tuple[tuple[str, bool], ...] = (),
) -> tuple[Process, str]:
    """The farm's nginx (deploy/nginx) on a free port, in front of `web`,
    its fast path serving `hosts` (the demo's ALLOWED_HOSTS, as the farms'
    nodes have it) and refusing `refused_agents` (pattern, ignoring case)."""
    from django.conf import settings

    from demofarm.farm import Served, nginx_argv, render_nginx

    port = free_port()
    conf = render_nginx(
        listen=f"127.0.0.1:{port}",
        web=[url.removeprefix("http://") for url in web],
        memcached=memcached,
        namespace=namespace,
        run_dir=log_dir / f"nginx-{port}",
        static_root=Path(settings.STATIC_ROOT),  # where the run collected them (tests/conftest.py)
        access_log=str(log_dir / f"nginx-{port}-access.log") if access_log else "off",
        served=Served(hosts=hosts, refused_agents=refused_agents),
    )
    process = Process(f"nginx-{port}", nginx_argv(conf), log_dir=log_dir).start()
    base = f"http://127.0.0.1:{port}"
    wait_for(
        lambda: (
            requests.get(f"{base}/static/webfarm_progress/progress.js", timeout=2).status_code == 200
            or not process.alive()
        ),
        timeout=30,
        what="nginx",
    )
    assert process.alive(), process.log()
    return process, base
