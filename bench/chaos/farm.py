"""The chaos run's farm: real processes, each of which the nemesis may
kill, stall or restart where it was. On the loopback, or with `lan` each on
a host of its own (tests/harness/hosts.py), where the nemesis also unplugs
hosts and cuts paths."""

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.harness import full, hosts, keyspace, processes

# Beat's tasks' queue, as the hosts farm names it: served by a worker beside
# beat (not a nemesis target, as beat is not).
from tests.harness.hostfarm import HOUSEKEEPING

WORKERS = ("w1", "w2", "w3")
NODES = ("web1", "web2")
NAME = "chaos"
# memcached as the farm's docs say to run it: -M refuses a write when full
# rather than evict a queued task or a vote. Small, so a fault fills it fast.
MEMCACHED_MB = 64
MEMCACHED_FLAGS = ["-M"]
# The hosts of a run with network faults; the run's own threads are the client.
HOSTS = {
    "web1": 11,
    "web2": 12,
    "memcached": 21,
    "memcached2": 22,  # the server a pool change adds, and then takes away again
    "w1": 31,
    "w2": 32,
    "w3": 33,
    "db": 40,
    "client": 100,
}
# Seconds each process acts on the pool it last read (MEMCACHED_POOL_STALE):
# short, so a pool change's four stages fit in a short run.
POOL_STALE = 2
# Beat, the reaper's clock, runs beside a web node (as deploy/ puts it).
BEAT_HOST = "web2"


@dataclass
class Farm:
    dir: Path
    env: dict
    memcached: processes.Process
    memcached_port: int
    nodes: dict[str, processes.Process] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    workers: dict[str, processes.Process] = field(default_factory=dict)
    started: list[processes.Process] = field(default_factory=list)
    lan: hosts.Lan | None = None

    def address(self, host: str) -> str:
        return address(self.lan, host)

    def on(self, host: str) -> Callable[[list[str]], list[str]]:
        return on(self.lan, host)

    def url(self, node: str) -> str:
        return f"http://{self.address(node)}:{self.ports[node]}"

    def start_node(self, name: str) -> None:
        port = self.ports.setdefault(name, processes.free_port())
        process, _ = processes.gunicorn(
            self.env,
            self.dir,
            name,
            port=port,
            listen=self.address(name),
            wrap=self.on(name),
        )
        self.nodes[name] = process
        self.started.append(process)

    def start_worker(self, name: str) -> None:
        # Its own queue too: the checker sends it a task there (PROBE_TASK).
        queues = f"{NAME},{own_queue(name)}"
        process = processes.celery_worker(
            self.env, self.dir, name, concurrency=1, queues=queues, wrap=self.on(name)
        )
        self.workers[name] = process
        self.started.append(process)

    def restart_memcached(self) -> None:
        self.memcached.stop(signal.SIGKILL)
        self.memcached, _ = start_memcached(self.dir, self.lan, port=self.memcached_port)
        self.started.append(self.memcached)

    def change_pool(self) -> list[str]:
        """Grow the pool to a second memcached and shrink it back, each with
        the operators' command, while the farm runs. Returns what the
        removed server still holds of the farm's (it should hold nothing)."""
        second, added = processes.memcached(
            self.dir,
            port=self.memcached_port,
            memory_mb=MEMCACHED_MB,
            extra=MEMCACHED_FLAGS,
            listen=self.address("memcached2"),
            wrap=self.on("memcached2"),
        )
        self.started.append(second)
        for servers in (f"{self.memcached_address},{added}", self.memcached_address):
            # A change that fails stays where it stopped, its servers running
            # (the farm uses them); the run's end stops them.
            said = processes.manage(self.env, "memcached_pool", "--to", servers, "--wait", "120")
            print("".join(f"    {line}\n" for line in said.splitlines()), end="", flush=True)
        left = [item.key for item in keyspace.items(added, f"{NAME}:")]
        second.stop()
        return left

    def fill_memcached(self, seed: int, lasts: float) -> list[str]:
        """Fill memcached until it refuses every size; returns the filler's
        keys (they expire on their own soon after the fault's end)."""
        return full.fill(self.memcached_address, seed=seed, expire=int(lasts) + 30)

    def empty_memcached(self, keys: list[str]) -> None:
        full.empty(self.memcached_address, keys)

    @property
    def memcached_address(self) -> str:
        return f"{self.address('memcached')}:{self.memcached_port}"

    def process(self, role: str, name: str) -> processes.Process:
        return (self.workers if role == "worker" else self.nodes)[name]

    def signal(self, role: str, name: str, sig: int) -> None:
        proc = self.process(role, name).proc
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, sig)

    def shell(self, code: str) -> str:
        return processes.manage(self.env, "shell", "-c", code).strip().splitlines()[-1]


def own_queue(worker: str) -> str:
    return f"{NAME}-{worker}"


def address(lan: hosts.Lan | None, host: str) -> str:
    return lan.addresses[host] if lan else "127.0.0.1"


def on(lan: hosts.Lan | None, host: str) -> Callable[[list[str]], list[str]]:
    """What runs a command on `host` (on the loopback: the command itself)."""
    return (lambda argv: lan.command(host, argv)) if lan else list


def start_memcached(
    base: Path, lan: hosts.Lan | None, port: int | None = None
) -> tuple[processes.Process, str]:
    return processes.memcached(
        base,
        port=port,
        memory_mb=MEMCACHED_MB,
        extra=MEMCACHED_FLAGS,
        listen=address(lan, "memcached"),
        wrap=on(lan, "memcached"),
    )


def farm_env(base: Path, address: str, database: str, lan: hosts.Lan | None = None) -> dict:
    nodes = {"DJANGO_ALLOWED_HOSTS": ",".join(lan.addresses[node] for node in NODES)} if lan else {}
    return processes.one_memcached_env(
        base,
        address,
        NAME,
        DATABASE_URL=database,
        # A killed worker's tasks come back within seconds, not a minute.
        CELERY_BROKER_VISIBILITY_TIMEOUT=4,
        DEMO_ORDERS=20000,
        REPORTS_CHUNK_ROWS=500,
        REPORTS_PART_ROWS=15000,
        PROGRESS_HEARTBEAT_INTERVAL=1,
        REAP_EVERY=1,
        REPORTS_PER_USER=3,
        REPORTS_PER_KIND=6,
        POLLS_FLUSH_EVERY=1,
        # Beat's tasks not behind the reports: a vote waits a second in memcached, not a report's run.
        HOUSEKEEPING_QUEUE=HOUSEKEEPING,
        POLLS_ANONYMOUS_PER_ADDRESS=10_000_000,  # every voter comes from one address here
        ACTIVITY_DRAIN_EVERY=1,
        MEMCACHED_POOL_STALE=POOL_STALE,
        MEMCACHED_POOL_REFRESH=0.5,
        **nodes,
    )
