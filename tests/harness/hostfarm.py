"""A farm built on test hosts (tests/harness/hosts.py) from deploy/ alone
(tests/harness/deployment.py): PostgreSQL on `db`, memcached on `mc1` and `mc2`, the
web unit on `web1` and `web2`, nginx on `balancer`, and if asked the worker
unit on `worker1` and `worker2` and beat and its worker on `web2`. A lan with
an `mc3` host gets a memcached there too, outside the farm's list (the
server a pool change adds). Shared by tests/hosts/ and bench/farm.py."""

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import requests

from demofarm.farm import Served, nginx_argv, render_nginx
from tests.harness import deployment, hosts, processes
from tests.harness.web import DEMO_PASSWORD

HOUSEKEEPING = "housekeeping"
HOSTS = {
    "balancer": 5,
    "web1": 11,
    "web2": 12,
    "mc1": 21,
    "mc2": 22,
    "worker1": 31,
    "worker2": 32,
    "db": 40,
    "client": 100,
}
WEB_PORT = 8000  # deploy/systemd/webfarm-web.service
MEMCACHED_PORT = 11211  # deploy/memcached/memcached.conf


@dataclass
class HostFarm:
    lan: hosts.Lan
    dir: Path
    env: dict
    url: str  # the balancer
    started: dict[str, processes.Process] = field(default_factory=dict)

    def address(self, host: str) -> str:
        return self.lan.addresses[host]

    def node(self, host: str) -> str:
        return f"http://{self.address(host)}:{WEB_PORT}"

    def logs(self, *hosts_: str) -> str:
        return "".join(p.log() for name, p in self.started.items() if name.split("-")[0] in hosts_)


@contextmanager
def host_farm(
    lan: hosts.Lan, base: Path, *, extra: dict[str, str], workers: bool = True, seed: bool = True
) -> Iterator[HostFarm]:
    """The farm on `lan`'s hosts, its processes stopped afterwards. `extra`:
    settings added to the environment file."""
    with ExitStack() as cleanups, processes.stopped_after() as started:
        a = lan.addresses
        memcached = ",".join(f"{a[h]}:{MEMCACHED_PORT}" for h in ("mc1", "mc2"))
        env_file = base / "webfarm.env"
        env_file.write_text(
            deployment.render_env_file(
                {
                    "DJANGO_SECRET_KEY": "hosts-" + uuid.uuid4().hex,
                    "DJANGO_ALLOWED_HOSTS": ",".join(a[h] for h in ("balancer", "web1", "web2")),
                    "DJANGO_CSRF_TRUSTED_ORIGINS": f"http://{a['balancer']}",
                    "DJANGO_SECURE_COOKIES": "false",  # plain HTTP inside the test network
                    "DATABASE_URL": f"postgres://postgres@{a['db']}:5432/webfarm",
                    "MEMCACHED_SERVERS": memcached,
                    "MEMCACHED_NAMESPACE": "webfarm",
                    "QUEUES_MIRRORS": memcached,
                    "CELERY_BROKER_URL": "memcached://",
                    "HOUSEKEEPING_QUEUE": HOUSEKEEPING,  # webfarm-housekeeping.service's -Q
                    "TRUSTED_PROXIES": a["balancer"],
                    "QUEUE_API_TOKEN": uuid.uuid4().hex,
                    "STATS_API_TOKEN": uuid.uuid4().hex,
                    "ACTIVITY_LOG_FILE": str(base / "activity.log"),
                },
                extra={"DEMO_PASSWORD": DEMO_PASSWORD, **extra},
            )
        )
        env = deployment.process_env(env_file)
        farm = HostFarm(lan=lan, dir=base, env=env, url=f"http://{a['balancer']}")

        def start(host: str, name: str, argv: list[str]) -> processes.Process:
            process = lan.start(host, name, argv, log_dir=base, env=env)
            started.append(process)
            farm.started[f"{host}-{name}"] = process
            return process

        # Not under pytest's own directory, which the postgres user may not enter.
        db_dir = Path(tempfile.mkdtemp(prefix="webfarm-hosts-db-"))
        cleanups.callback(shutil.rmtree, db_dir, ignore_errors=True)
        started.append(
            processes.start_postgres(
                db_dir,
                listen=a["db"],
                port=5432,
                trust=f"{hosts.SUBNET}.0/{hosts.PREFIX}",
                wrap=lambda argv: lan.command("db", argv),
            )
        )
        lan.run("db", ["runuser", "-u", "postgres", "--", "createdb", "-h", str(db_dir), "webfarm"], env=env)
        for host in ("mc1", "mc2", "mc3") if "mc3" in a else ("mc1", "mc2"):
            start(host, "memcached", deployment.memcached_command(a[host]))
            hosts.wait_port(lan, "client", a[host], MEMCACHED_PORT)
        manage = [str(processes.BIN / "python"), "manage.py"]
        lan.run("web1", [*manage, "migrate", "--no-input", "-v", "0"], env=env)
        if seed:
            lan.run("web1", [*manage, "seed_demo", "-v", "0"], env=env)
        if workers:
            for n, host in enumerate(("worker1", "worker2"), 1):
                start(host, "worker", deployment.unit_command("webfarm-worker@.service", str(n), state=base))
            # Beat on a web host: a worker host cut off from the broker leaves the reaper running.
            start("web2", "beat", deployment.unit_command("webfarm-beat.service", state=base))
            start("web2", "housekeeping", deployment.unit_command("webfarm-housekeeping.service", state=base))
        for host in ("web1", "web2"):
            argv = deployment.unit_command("webfarm-web.service", state=base)
            if lan.one_machine:  # every host on one machine: each node on its own address
                argv = [f"{a[host]}:{WEB_PORT}" if arg == f"0.0.0.0:{WEB_PORT}" else arg for arg in argv]
            start(host, "web", argv)
        start("balancer", "nginx", _nginx_argv(farm, base))
        with lan.inside("client"):
            for url in (farm.node("web1"), farm.node("web2"), farm.url):
                processes.wait_for(
                    lambda url=url: requests.get(f"{url}/accounts/login/", timeout=2).status_code == 200,
                    timeout=90,
                    what=url,
                )
        if workers:
            for host in ("worker1", "worker2"):
                processes.wait_for(lambda host=host: " ready." in farm.logs(host), timeout=90, what=host)
        yield farm


def _nginx_argv(farm: HostFarm, base: Path) -> list[str]:
    return nginx_argv(render_balancer(farm, ("mc1", "mc2")))


def render_balancer(farm: HostFarm, memcached: tuple[str, ...], run_dir: Path | None = None) -> Path:
    """nginx's configuration for the balancer, its fast path reading
    `memcached` (hosts), in run_dir (the one nginx runs from by default):
    the nginx.conf."""
    return render_nginx(
        listen=f"{farm.address('balancer')}:80",
        web=[f"{farm.address(h)}:{WEB_PORT}" for h in ("web1", "web2")],
        memcached=[f"{farm.address(h)}:{MEMCACHED_PORT}" for h in memcached],
        namespace="webfarm",
        run_dir=run_dir or farm.dir / "nginx",
        # As the nodes' DJANGO_ALLOWED_HOSTS.
        served=Served(hosts=tuple(farm.address(h) for h in ("balancer", "web1", "web2"))),
    )
