"""`make run`: start the embedded farm from the Procfile with honcho.

memcached is started on 127.0.0.1:--memcached-port (11211) unless
MEMCACHED_SERVERS points elsewhere; a memcached already answering there is
used, and the banner says so; anything else there stops the launch. It is
also the Celery broker by default; Redis is started only when
CELERY_BROKER_URL names a local Redis that is not running. Ctrl-C stops
every process started here, also when the console is piped into a program
the same Ctrl-C ends (`make run | tee log`).
"""

import argparse
import os
import socket
import sys
from pathlib import Path
from typing import TextIO

from honcho.environ import parse_procfile
from honcho.manager import Manager
from honcho.printer import Printer
from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheError

ROOT = Path(__file__).resolve().parent.parent
DEMO_USERS = "alice, bob (users) and admin (staff)"
LOCAL_REDIS = ("redis://127.0.0.1:6379", "redis://localhost:6379")
# By its message: the interpreter reads PYTHONWARNINGS before Celery is importable.
ROOT_WARNING = "ignore:You're running the worker with superuser privileges"


def answers(host: str, port: int) -> bool:
    """Whether something listens on host:port (a service we need not start)."""
    try:
        with socket.create_connection((host, port), timeout=0.3):
            return True
    except OSError:
        return False


def memcached_version(host: str, port: int) -> str | None:
    """What listens on host:port, if it is a memcached: its version."""
    client = Client((host, port), connect_timeout=1, timeout=1)
    try:
        return client.version().decode("ascii", "replace")
    except (MemcacheError, OSError):
        return None
    finally:
        client.close()


class PortTaken(Exception):
    """Something that is not memcached listens where make run's memcached would."""


def select_processes(env: dict[str, str], memcached_port: int = 11211) -> tuple[list[str], str]:
    """The Procfile's processes to start, and what the banner says of memcached."""
    names = ["worker", "beat", "web"]
    said = ""
    if not env.get("MEMCACHED_SERVERS"):
        env["MEMCACHED_SERVERS"] = f"127.0.0.1:{memcached_port}"
        env["MEMCACHED_PORT"] = str(memcached_port)
        if not answers("127.0.0.1", memcached_port):
            names.insert(0, "memcached")
        elif (version := memcached_version("127.0.0.1", memcached_port)) is not None:
            said = (
                f"memcached: the one already on 127.0.0.1:{memcached_port} (version {version}); "
                "MEMCACHED_PORT=<free port> starts one of its own"
            )
        else:
            raise PortTaken(
                f"127.0.0.1:{memcached_port} is taken by something that is not memcached: "
                "start with MEMCACHED_PORT=<free port> (make run MEMCACHED_PORT=11311)"
            )
    broker = env.get("CELERY_BROKER_URL", "")
    if broker.startswith(LOCAL_REDIS) and not answers("127.0.0.1", 6379):
        names.insert(0, "redis")
    return names, said


class QuietWhenGone:
    """The console, going quiet once whoever read it is gone: with `make run
    | tee log`, Ctrl-C ends tee too, and a print failing on the broken pipe
    would stop the launcher before it stopped the processes."""

    def __init__(self, stream: TextIO) -> None:
        self.stream, self.gone = stream, False

    def write(self, text: str) -> None:
        if not self.gone:
            try:
                self.stream.write(text)
                self.stream.flush()
            except OSError:  # BrokenPipeError, or a closed terminal
                self.gone = True

    def flush(self) -> None:
        self.write("")

    def isatty(self) -> bool:
        return not self.gone and self.stream.isatty()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--memcached-port", type=int, default=11211)
    args = parser.parse_args(argv)

    env = {**os.environ, "HOST": args.host, "PORT": str(args.port), "PYTHONUNBUFFERED": "1"}
    as_root = os.geteuid() == 0
    if as_root:
        # Celery warns at length on every start as root; the banner says it once, shortly.
        env["PYTHONWARNINGS"] = ",".join(filter(None, [env.get("PYTHONWARNINGS"), ROOT_WARNING]))
    procfile = parse_procfile((ROOT / "Procfile").read_text())
    try:
        names, memcached_said = select_processes(env, args.memcached_port)
    except PortTaken as exc:
        print(f"make run: {exc}", file=sys.stderr)
        return 2
    commands = {name: procfile.processes[name] for name in names}
    password = env.get("DEMO_PASSWORD", "webfarm-demo")
    banner = (
        f"webfarm is starting: http://{args.host}:{args.port}/\n"
        f"  demo logins: {DEMO_USERS}, password {password!r}"
    )
    if memcached_said:
        banner += f"\n  {memcached_said}"
    if as_root:
        banner += "\n  running as root: fine on your machine; a farm runs each role as its own user (deploy/)"
    return run_processes(commands, env, banner)


def run_processes(commands: dict[str, str], env: dict[str, str], banner: str) -> int:
    """Run the commands under honcho until Ctrl-C (or one of them exits): its exit status."""
    console = QuietWhenGone(sys.stdout)
    manager = Manager(Printer(console))
    for name, command in commands.items():
        manager.add_process(name, command, env=env, cwd=str(ROOT))
    console.write(f"\n  {banner}\n  processes: {', '.join(commands)}   (Ctrl-C stops them all)\n\n")
    manager.loop()
    if console.gone:
        # Nothing left to flush into at exit, where Python would complain of it.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return manager.returncode or 0


if __name__ == "__main__":
    sys.exit(main())
