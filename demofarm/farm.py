"""`make farm`: the whole farm on one machine, behind nginx.

nginx on PORT (round robin over the web nodes, progress polls answered from
memcached), FARM_WEB_NODES gunicorn nodes, FARM_WORKERS Celery workers,
celery beat and a worker of one process for beat's tasks
(HOUSEKEEPING_QUEUE), two memcached servers (the vote queue mirrored on
both), and PostgreSQL (DATABASE_URL; the database is created if missing). The broker is
memcached, or the local Redis with FARM_BROKER=redis. Ctrl-C stops what it
started.

`python -m demofarm.farm manage <command> ...` runs a management command
against this farm (its memcached, database and key), as `manage.py` by hand
would not: that one reaches `make run`'s.

`python -m demofarm.farm nginx` prints deploy/nginx/webfarm.conf.template filled in from
the environment, for a balancer on another machine (docs/farm.md).
"""

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from string import Template

import psycopg
from psycopg import sql

from demofarm.env import env_list, env_str
from demofarm.launch import DEMO_USERS, answers, run_processes

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
VENV_BIN = Path(sys.executable).parent  # the venv `make farm` runs in
RUN_DIR = ROOT / "var" / "farm"
DEFAULT_DATABASE = "postgresql://postgres@127.0.0.1:5432/webfarm"
MEMCACHED_PORTS = (11311, 11312)
WEB_PORT_BASE = 8101


@dataclass(frozen=True)
class Served:
    """What Django serves: the hosts (ALLOWED_HOSTS) and the user agents it
    refuses (DISALLOWED_USER_AGENTS: pattern, ignoring case), so that
    nginx's fast path answers no request Django would refuse."""

    hosts: tuple[str, ...] = ("*",)
    refused_agents: tuple[tuple[str, bool], ...] = ()

    @classmethod
    def from_settings(cls) -> "Served":
        """As the site's settings have them (DJANGO_SETTINGS_MODULE, else the demo's)."""
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demofarm.settings")
        from django.conf import settings

        hosts = list(settings.ALLOWED_HOSTS)
        if not hosts and settings.DEBUG:  # what Django allows then
            hosts = [".localhost", "127.0.0.1", "[::1]"]
        agents = [
            (pattern.pattern, bool(pattern.flags & re.IGNORECASE))
            for pattern in settings.DISALLOWED_USER_AGENTS
        ]
        return cls(tuple(hosts), tuple(agents))

    def host_rules(self) -> str:
        if "*" in self.hosts:
            return "    default 0;"
        return "\n".join(["    default 1;", *(f"    {_quoted(host.lower())} 0;" for host in self.hosts)])

    def agent_rules(self) -> str:
        return "\n".join(
            f"    {_quoted(('~*' if ignore_case else '~') + pattern)} 1;"
            for pattern, ignore_case in self.refused_agents
        )


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_nginx(
    *,
    listen: str,
    web: list[str],
    memcached: list[str],
    namespace: str,
    run_dir: Path,
    static_root: Path = ROOT / "staticfiles",
    access_log: str = "off",
    workers: int = 2,
    served: Served | None = None,
) -> Path:
    """Write webfarm.conf and a whole nginx.conf around it into run_dir;
    returns the nginx.conf to start nginx with."""
    run_dir.mkdir(parents=True, exist_ok=True)
    site = site_config(
        listen=listen,
        web=web,
        memcached=memcached,
        namespace=namespace,
        static_root=static_root,
        served=served or Served.from_settings(),
    )
    (run_dir / "webfarm.conf").write_text(site)
    main = _fill(
        "main.conf.template",
        RUN_DIR=run_dir,
        WORKERS=workers,
        ACCESS_LOG="off" if access_log == "off" else f"{access_log} webfarm",
        # nginx started by root drops to "nobody", which may not read the static files.
        USER_LINE="user root;" if os.geteuid() == 0 else "",
    )
    conf = run_dir / "nginx.conf"
    conf.write_text(main)
    return conf


def _fill(template: str, **values: object) -> str:
    # nginx's own $variables stay as they are; every ${NAME} of ours must be given.
    text = Template((DEPLOY / "nginx" / template).read_text()).safe_substitute(values)
    missing = [line for line in text.splitlines() if "${" in line and not line.lstrip().startswith("#")]
    if missing:
        raise ValueError(f"{template}: not filled in: {missing}")
    return text


def site_config(
    *, listen: str, web: list[str], memcached: list[str], namespace: str, static_root: Path, served: Served
) -> str:
    return _fill(
        "webfarm.conf.template",
        HOST_RULES=served.host_rules(),
        AGENT_RULES=served.agent_rules(),
        LISTEN=listen,
        WEB_SERVERS="\n".join(f"    server {node} max_fails=1 fail_timeout=5s;" for node in web),
        MEMCACHED_SERVERS="\n".join(
            f"    server {server} max_fails=1 fail_timeout=5s;" for server in memcached
        ),
        NAMESPACE=namespace,
        STATIC_ROOT=static_root,
        DEPLOY_DIR=DEPLOY,
    )


def nginx_argv(conf: Path) -> list[str]:
    return [
        shutil.which("nginx") or "/usr/sbin/nginx",
        "-p",
        str(conf.parent),
        "-c",
        str(conf),
        "-g",
        "daemon off;",
    ]


def _ensure_database(url: str) -> None:
    """Create the PostgreSQL database DATABASE_URL names, if it is missing."""
    info = psycopg.conninfo.conninfo_to_dict(url.replace("postgres://", "postgresql://", 1))
    name = info.pop("dbname", None) or "webfarm"
    with psycopg.connect(psycopg.conninfo.make_conninfo(**info, dbname="postgres"), autocommit=True) as admin:
        if admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def _manage(env: dict, *args: str) -> None:
    subprocess.run([str(VENV_BIN / "python"), "manage.py", *args], cwd=ROOT, env=env, check=True)


def farm_env(base: dict[str, str]) -> dict[str, str]:
    memcached = ",".join(f"127.0.0.1:{port}" for port in MEMCACHED_PORTS)
    env = {
        "DATABASE_URL": DEFAULT_DATABASE,
        "MEMCACHED_SERVERS": memcached,
        "QUEUES_MIRRORS": memcached,
        "MEMCACHED_NAMESPACE": "webfarm",
        # Beat's tasks on a worker of their own, as deploy/ runs them: a vote
        # flush never waits behind the workers' reports.
        "HOUSEKEEPING_QUEUE": "housekeeping",
        # Behind nginx: the client's address is in X-Forwarded-For.
        "TRUSTED_PROXIES": "127.0.0.1",
        **base,
        "PYTHONUNBUFFERED": "1",
    }
    if base.get("FARM_BROKER") == "redis":
        env.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
    return env


def processes(env: dict[str, str], *, port: int, nodes: int, workers: int) -> dict[str, str]:
    """The farm's commands by name, for honcho."""
    user = shlex.quote(os.environ.get("USER") or "root")
    commands: dict[str, str] = {}
    for n, mc_port in enumerate(MEMCACHED_PORTS, 1):
        # -M: refuse writes when full rather than evict (a queued task or vote must not vanish).
        commands[f"memcached{n}"] = f"memcached -l 127.0.0.1 -p {mc_port} -m 256 -M -U 0 -u {user}"
    web = [f"127.0.0.1:{WEB_PORT_BASE + n}" for n in range(nodes)]
    for n, address in enumerate(web, 1):
        commands[f"web{n}"] = (
            f"{VENV_BIN}/gunicorn demofarm.wsgi -b {address} -w 2 --threads 4 --access-logfile - "
            "--logger-class webfarm.activity.accesslog.PollsCounted --graceful-timeout 10"
        )
    for n in range(1, workers + 1):
        commands[f"worker{n}"] = f"{VENV_BIN}/celery -A demofarm worker -l info -n worker{n}@%h"
    commands["beat"] = f"{VENV_BIN}/celery -A demofarm beat -l info --schedule {RUN_DIR}/celerybeat-schedule"
    if env.get("HOUSEKEEPING_QUEUE"):  # deploy/systemd/webfarm-housekeeping.service
        commands["housekeeping"] = (
            f"{VENV_BIN}/celery -A demofarm worker -l info -n housekeeping@%h "
            f"-Q {shlex.quote(env['HOUSEKEEPING_QUEUE'])} --concurrency 1"
        )
    conf = render_nginx(
        listen=f"{env.get('HOST', '127.0.0.1')}:{port}",
        web=web,
        memcached=env["MEMCACHED_SERVERS"].split(","),
        namespace=env["MEMCACHED_NAMESPACE"],
        run_dir=RUN_DIR,
        access_log=str(RUN_DIR / "access.log"),
    )
    # Started once the nodes listen, so its first visitors get pages, not 502s.
    commands["nginx"] = shlex.join(
        [str(VENV_BIN / "python"), "-m", "demofarm.ready", ",".join(web), "--", *nginx_argv(conf)]
    )
    if env.get("CELERY_BROKER_URL", "").startswith("redis://127.0.0.1:6379") and not answers(
        "127.0.0.1", 6379
    ):
        commands["redis"] = 'redis-server --bind 127.0.0.1 --port 6379 --save "" --appendonly no'
    return commands


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", nargs="?", choices=["run", "nginx", "manage"], default="run")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    parser.add_argument("command", nargs=argparse.REMAINDER, help="manage: the command and its arguments")
    args = parser.parse_args(argv)
    if args.what == "manage":
        env = farm_env(dict(os.environ))
        return subprocess.run(
            [str(VENV_BIN / "python"), "manage.py", *args.command], cwd=ROOT, env=env
        ).returncode
    if args.what == "nginx":
        print(
            site_config(
                listen=env_str("NGINX_LISTEN", "80"),
                web=env_list("NGINX_WEB_NODES", "127.0.0.1:8000"),
                memcached=env_list("MEMCACHED_SERVERS", "127.0.0.1:11211"),
                namespace=env_str("MEMCACHED_NAMESPACE", "webfarm"),
                static_root=Path(env_str("STATIC_ROOT", str(ROOT / "staticfiles"))),
                served=Served.from_settings(),
            )
        )
        return 0

    env = farm_env(dict(os.environ))
    nodes = int(env.get("FARM_WEB_NODES", "2"))
    workers = int(env.get("FARM_WORKERS", "2"))
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    if env["DATABASE_URL"].startswith(("postgres://", "postgresql://")):
        _ensure_database(env["DATABASE_URL"])
    _manage(env, "migrate", "--no-input", "-v", "0")
    _manage(env, "collectstatic", "--no-input", "-v", "0")
    _manage(env, "seed_demo")
    commands = processes(env, port=args.port, nodes=nodes, workers=workers)
    password = env.get("DEMO_PASSWORD", "webfarm-demo")
    banner = (
        f"the farm is starting behind nginx: http://{env.get('HOST', '127.0.0.1')}:{args.port}/\n"
        f"  {nodes} web nodes, {workers} workers, memcached on {env['MEMCACHED_SERVERS']}, "
        f"database {env['DATABASE_URL']}\n"
        f"  demo logins: {DEMO_USERS}, password {password!r}\n"
        f"  a command against this farm: {VENV_BIN.parent.name}/bin/python -m demofarm.farm manage <command>"
    )
    return run_processes(commands, env, banner)


if __name__ == "__main__":
    sys.exit(main())
