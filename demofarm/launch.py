"""`make run`: start the embedded farm from the Procfile with honcho.

memcached is started unless MEMCACHED_SERVERS points elsewhere or one already
answers on 127.0.0.1:11211. It is also the Celery broker by default; Redis is
started only when CELERY_BROKER_URL names a local Redis that is not running. Ctrl-C stops
every process started here.
"""

import argparse
import os
import socket
import sys
from pathlib import Path

from honcho.environ import parse_procfile
from honcho.manager import Manager

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


def select_processes(env: dict[str, str]) -> list[str]:
    names = ["worker", "beat", "web"]
    if not env.get("MEMCACHED_SERVERS") and not answers("127.0.0.1", 11211):
        names.insert(0, "memcached")
    broker = env.get("CELERY_BROKER_URL", "")
    if broker.startswith(LOCAL_REDIS) and not answers("127.0.0.1", 6379):
        names.insert(0, "redis")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)

    env = {**os.environ, "HOST": args.host, "PORT": str(args.port), "PYTHONUNBUFFERED": "1"}
    as_root = os.geteuid() == 0
    if as_root:
        # Celery warns at length on every start as root; the banner says it once, shortly.
        env["PYTHONWARNINGS"] = ",".join(filter(None, [env.get("PYTHONWARNINGS"), ROOT_WARNING]))
    procfile = parse_procfile((ROOT / "Procfile").read_text())
    names = select_processes(env)
    commands = {name: procfile.processes[name] for name in names}
    password = env.get("DEMO_PASSWORD", "webfarm-demo")
    banner = (
        f"webfarm is starting: http://{args.host}:{args.port}/\n"
        f"  demo logins: {DEMO_USERS}, password {password!r}"
    )
    if as_root:
        banner += "\n  running as root: fine on your machine; a farm runs each role as its own user (deploy/)"
    return run_processes(commands, env, banner)


def run_processes(commands: dict[str, str], env: dict[str, str], banner: str) -> int:
    """Run the commands under honcho until Ctrl-C (or one of them exits): its exit status."""
    manager = Manager()
    for name, command in commands.items():
        manager.add_process(name, command, env=env, cwd=str(ROOT))
    print(f"\n  {banner}\n  processes: {', '.join(commands)}   (Ctrl-C stops them all)\n", flush=True)
    manager.loop()
    return manager.returncode or 0


if __name__ == "__main__":
    sys.exit(main())
