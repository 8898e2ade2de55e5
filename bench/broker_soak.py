"""A soak of the broker: tens of thousands of Celery tasks at a steady rate
through the memcached broker, then the same through Redis, under the same
faults: workers killed (the whole process group) and started again, the
broker's server paused, the sender paused in the middle of its sends (on
memcached, while it holds indexes it reserved). Every task notes when it was
sent and when it ran, in a memcached of the store's own, never paused.

It counts the tasks accepted, the runs, the duplicates (a task run again
after its worker was killed with it unacknowledged: at-least-once) and the
missing, and the longest time with no task run while a task sent before it
waited. Before the load, what an idle worker costs on each broker: its CPU
and the broker's requests for 20 s.

    python -m bench.broker_soak        (SOAK_TASKS, SOAK_RATE to change the load)
"""

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from pymemcache.client.base import Client

from bench.soak_tasks import SHARD
from tests.harness import keyspace, processes
from webfarm.progress.liveness import process_stats

TASKS = int(os.environ.get("SOAK_TASKS", "20000"))
RATE = float(os.environ.get("SOAK_RATE", "200"))
VISIBILITY = 10  # seconds until a killed worker's tasks are handed out again
IDLE_SECONDS = 20
WORKERS = 2


@dataclass
class Fault:
    at: float  # seconds after the sends began
    kind: str  # kill-worker, pause-broker, pause-sender
    seconds: float
    target: int = 0  # which worker


def schedule(seconds: float) -> list[Fault]:
    """The faults of a run of `seconds` of sends: a worker killed every
    fifth of it, the broker paused twice, the sender once."""
    faults = [Fault(seconds * k / 5, "kill-worker", 2, target=k % WORKERS) for k in range(1, 5)]
    faults += [Fault(seconds * 0.3, "pause-broker", 3), Fault(seconds * 0.7, "pause-broker", 3)]
    faults.append(Fault(seconds * 0.5, "pause-sender", 4))
    return sorted(faults, key=lambda fault: fault.at)


@dataclass
class Farm:
    kind: str
    dir: Path
    env: dict
    broker: processes.Process
    broker_address: str
    workers: list[processes.Process] = field(default_factory=list)
    started: list[processes.Process] = field(default_factory=list)
    restarts: int = 0

    def worker(self, slot: int) -> processes.Process:
        self.restarts += 1
        worker = processes.celery_worker(
            self.env, self.dir, f"soak-{self.kind}-{slot}-{self.restarts}", include="bench.soak_tasks"
        )
        self.started.append(worker)
        return worker


def _cpu_seconds(pgid: int) -> float:
    """User and system CPU of every process in the group, from /proc."""
    # The fields after the name: state, ppid, pgrp, ..., utime (11), stime (12).
    ticks = sum(int(f[11]) + int(f[12]) for _, f in process_stats() if len(f) > 12 and int(f[2]) == pgid)
    return ticks / os.sysconf("SC_CLK_TCK")


def _broker_requests(farm: Farm) -> int:
    """Requests the broker's server has answered so far."""
    if farm.kind == "memcached":
        stats = keyspace.stats(farm.broker_address)
        return sum(value for name, value in stats.items() if name.startswith("cmd_"))
    host, port = farm.broker_address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"INFO stats\r\n")
        reply = b""
        while b"total_commands_processed:" not in reply or not reply.endswith(b"\r\n"):
            reply += sock.recv(65536)
    line = next(x for x in reply.decode().splitlines() if x.startswith("total_commands_processed:"))
    return int(line.split(":")[1])


def _idle_cost(farm: Farm) -> dict[str, float]:
    """An idle worker's CPU share and the broker's requests a second, over IDLE_SECONDS."""
    worker = farm.workers[0]
    cpu, asked, start = _cpu_seconds(worker.proc.pid), _broker_requests(farm), time.monotonic()
    time.sleep(IDLE_SECONDS)  # the measurement window itself
    elapsed = time.monotonic() - start
    return {
        "worker_cpu_percent": 100 * (_cpu_seconds(worker.proc.pid) - cpu) / elapsed,
        "broker_requests_per_s": (_broker_requests(farm) - asked) / elapsed,
    }


class Nemesis(threading.Thread):
    """Carries the faults out at their times, from when the sends began."""

    def __init__(self, farm: Farm, sender: subprocess.Popen, faults: list[Fault]) -> None:
        super().__init__(daemon=True)
        self.farm, self.sender, self.faults = farm, sender, faults
        self.begun = time.monotonic()
        self.done: list[str] = []
        self.at: list[tuple[float, str]] = []  # when each fault was over, on the wall clock

    def run(self) -> None:
        for fault in self.faults:
            wait = self.begun + fault.at - time.monotonic()
            if wait > 0:
                time.sleep(wait)  # the schedule's own clock
            if fault.kind == "kill-worker":
                victim = self.farm.workers[fault.target]
                os.killpg(victim.proc.pid, signal.SIGKILL)
                victim.proc.wait(10)
                time.sleep(fault.seconds)
                self.farm.workers[fault.target] = self.farm.worker(fault.target)
            else:
                pid = self.farm.broker.proc.pid if fault.kind == "pause-broker" else self.sender.pid
                os.kill(pid, signal.SIGSTOP)
                time.sleep(fault.seconds)
                os.kill(pid, signal.SIGCONT)
            self.done.append(f"{fault.at:.0f} s {fault.kind} {fault.seconds:g} s")
            self.at.append((time.time(), fault.kind))


def _runs(store: str, namespace: str) -> list[tuple[int, float, float]]:
    """Every run noted: (number, sent at, ran at)."""
    host, port = store.rsplit(":", 1)
    client = Client((host, int(port)))
    try:
        keys = [f"{namespace}:soak:ran:{shard}" for shard in range(TASKS // SHARD + 1)]
        found = client.get_many(keys)
    finally:
        client.close()
    runs = []
    for raw in found.values():
        for line in raw.decode().split(","):
            if line:
                number, sent, ran = line.split(":")
                runs.append((int(number), float(sent), float(ran)))
    return runs


def _longest_wait(runs: list[tuple[int, float, float]]) -> float:
    """The longest time with no run while a task sent before it had not run yet."""
    first_run: dict[int, tuple[float, float]] = {}
    for number, sent, ran in runs:
        if number not in first_run or ran < first_run[number][1]:
            first_run[number] = (sent, ran)
    times = sorted(ran for _, _, ran in runs)
    gaps = sorted(((b - a, a, b) for a, b in itertools.pairwise(times)), reverse=True)
    for gap, start, end in gaps[:20]:
        if any(sent < start and ran >= end for sent, ran in first_run.values()):
            return gap
    return 0.0


def _beside(when: float, faults: list[tuple[float, str]]) -> str:
    """`when` as seconds after the end of the fault before it."""
    before = [(at, kind) for at, kind in faults if at <= when]
    if not before:
        return f"{when - faults[0][0]:+.2f} s from the first fault's end" if faults else "no fault"
    at, kind = before[-1]
    return f"{when - at:.2f} s after a {kind} ended"


def soak(kind: str, base: Path, store: str) -> dict:
    workdir = base / kind
    workdir.mkdir()
    with processes.stopped_after() as started:
        if kind == "memcached":
            broker, address = processes.memcached(workdir, memory_mb=64, extra=["-M"])
            url = f"memcached://{address}"
        else:
            broker, url = processes.redis(workdir)
            address = url.removeprefix("redis://").split("/")[0]
        started.append(broker)
        namespace = f"soak{kind}"
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "bench.soak_settings",
            # One key for the sender and the workers: the broker's messages are sealed with it.
            "DJANGO_SECRET_KEY": f"broker-soak-{uuid.uuid4().hex}",
            "MEMCACHED_SERVERS": store,
            "MEMCACHED_NAMESPACE": namespace,
            "CELERY_BROKER_URL": url,
            "CELERY_TASK_DEFAULT_QUEUE": namespace,
            "CELERY_BROKER_VISIBILITY_TIMEOUT": str(VISIBILITY),
            # Short lifetimes, as a test farm sets them.
            "QUEUES_HOLE_TTL": "30",
            "QUEUES_FINISHED_TTL": "60",
            "LOG_LEVEL": "WARNING",
            "SOAK_TASKS": str(TASKS),
            "SOAK_RATE": str(RATE),
        }
        farm = Farm(kind, workdir, env, broker, address, started=started)
        farm.workers = [farm.worker(slot) for slot in range(WORKERS)]
        idle = _idle_cost(farm)
        sender = subprocess.Popen(
            [sys.executable, "-m", "bench.soak_sender"],
            env=env,
            cwd=processes.ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        nemesis = Nemesis(farm, sender, schedule(TASKS / RATE))
        nemesis.start()
        out, _ = sender.communicate(timeout=TASKS / RATE * 3 + 300)
        sent = json.loads(out.strip().splitlines()[-1])
        nemesis.join(timeout=120)
        deadline = time.monotonic() + 3 * VISIBILITY + 120
        while True:
            runs = _runs(store, namespace)
            if len({number for number, _, _ in runs}) >= TASKS or time.monotonic() > deadline:
                break
            time.sleep(1)  # polling the notes, with the deadline above
        distinct = {number for number, _, _ in runs}
        last_run = max((ran for _, _, ran in runs), default=0.0)
        return {
            "tasks": TASKS,
            "refused_sends": sent["refused_sends"],
            "runs": len(runs),
            "distinct": len(distinct),
            "missing": TASKS - len(distinct),
            # When each missing task was due to be sent, beside the fault just before it.
            "missing_sent": [
                _beside(sent["started_at"] + n / RATE, nemesis.at)
                for n in sorted(set(range(TASKS)) - distinct)[:10]
            ],
            "duplicates": len(runs) - len(distinct),
            "longest_wait_s": _longest_wait(runs),
            # From the last send to the last run: how long the faults' leftovers took.
            "drained_after_s": max(0.0, last_run - sent["ended_at"]),
            "faults": nemesis.done,
            **idle,
        }


def run() -> dict[str, dict]:
    base = Path(tempfile.mkdtemp(prefix="bench-broker-soak-"))
    with processes.stopped_after(base) as started:
        store_mc, store = processes.memcached(base, memory_mb=64)
        started.append(store_mc)
        return {kind: soak(kind, base, store) for kind in ("memcached", "redis")}


def report(results: dict[str, dict]) -> str:
    lines = [
        f"Broker soak: {TASKS} tasks at {RATE:g}/s, 2 workers (-c 2), acks late, visibility {VISIBILITY} s;",
        "faults: " + "; ".join(results["memcached"]["faults"]),
        f"{'broker':10} {'runs':>7} {'missing':>8} {'dupes':>6} {'longest wait s':>15} "
        f" {'drained s':>9} {'idle worker CPU %':>18} {'idle broker req/s':>18}",
    ]
    for kind, r in results.items():
        lines.append(
            f"{kind:10} {r['runs']:7d} {r['missing']:8d} {r['duplicates']:6d} {r['longest_wait_s']:15.2f}"
            f" {r['drained_after_s']:9.1f} {r['worker_cpu_percent']:18.2f} {r['broker_requests_per_s']:18.1f}"
        )
    for kind, r in results.items():
        if r["missing"]:
            lines.append(f"{kind}: missing tasks were due {'; '.join(r['missing_sent'])}")
    m, r = results["memcached"], results["redis"]
    lines.append(
        f"memcached / redis: longest wait {m['longest_wait_s'] / max(r['longest_wait_s'], 0.001):.2f}, "
        f"idle worker CPU {m['worker_cpu_percent'] / max(r['worker_cpu_percent'], 0.001):.1f}"
    )
    return "\n".join(lines)


def main() -> None:
    print(report(run()), flush=True)


if __name__ == "__main__":
    main()
