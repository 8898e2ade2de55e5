"""Faults at moments the seed picks, each healed a few seconds later."""

import random
import signal
import threading
import time
from dataclasses import dataclass

from bench.chaos.farm import NODES, WORKERS, Farm

# What the nemesis does, and how often, relative to the others.
FAULTS = {
    "kill-worker": 3,
    "kill-web": 2,
    "stall-worker": 2,
    "stall-web": 2,
    "restart-memcached": 1,
    "fill-memcached": 1,
}
# Added where each process runs on a host of its own (run(network=True)).
NETWORK_FAULTS = {
    "unplug-worker": 2,  # its cable out: tasks, heartbeats and the database go silent at once
    "unplug-web": 1,
    "unplug-memcached": 1,  # every key kept, nobody reaches it
    "cut-worker": 1,  # the worker alone loses its way to memcached, not to the database
    "cut-web": 1,
}
# A node cut off from memcached still answers, in time: its requests are not excused.
# Nor are any during a pool change: the farm runs on through it.
STILL_ANSWERS = {"cut-web", "change-pool"}
# Asked for (bench.chaos --hosts --pool-change), once a run: memcached's pool
# grown by a server and shrunk back (memcached_pool), at a moment the seed
# picks in the run's first half; no other memcached fault meanwhile. Seconds
# it takes at most.
POOL_CHANGE = "change-pool"
POOL_CHANGE_LASTS = 50.0
# Seconds between two faults' starts, and how long one lasts.
GAP = (4.0, 12.0)
LASTS = (2.0, 8.0)
# At most one memcached restart in this many seconds: each loses every key.
MEMCACHED_EVERY = 60.0


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the workload starts
    kind: str
    target: str
    lasts: float

    def __str__(self) -> str:
        return f"{self.at:7.1f}s  {self.kind:<18} {self.target:<10} {self.lasts:4.1f}s"


def schedule(seed: int, seconds: float, *, network: bool = False, pool_change: bool = False) -> list[Fault]:
    """The faults of a run of `seconds`, from the seed alone: every one
    healed before the run's end. `network`: network faults too;
    `pool_change` (with network): the pool change too."""
    rng = random.Random(seed)
    faults: list[Fault] = []
    busy: dict[str, float] = {}
    last_memcached = -MEMCACHED_EVERY
    at = rng.uniform(*GAP)
    faults_of = FAULTS | NETWORK_FAULTS if network else FAULTS
    kinds, weights = list(faults_of), list(faults_of.values())
    while True:
        kind = rng.choices(kinds, weights)[0]
        lasts = round(rng.uniform(*LASTS), 1)
        if kind == "restart-memcached":
            target, lasts = "memcached", 0.0
        elif kind.endswith("memcached"):
            target = "memcached"
        else:
            target = rng.choice(WORKERS if kind.endswith("worker") else NODES)
        if at + lasts > seconds - 5:
            return _with_pool_change(seed, seconds, faults) if network and pool_change else faults
        free = busy.get(target, 0.0) <= at
        if kind == "restart-memcached":
            free = free and at - last_memcached >= MEMCACHED_EVERY
        if free:
            faults.append(Fault(round(at, 1), kind, target, lasts))
            busy[target] = at + lasts + 1
            if kind == "restart-memcached":
                last_memcached = at
        at += rng.uniform(*GAP)


def _with_pool_change(seed: int, seconds: float, faults: list[Fault]) -> list[Fault]:
    """The schedule with the pool change in it, when the run is long enough:
    memcached's other faults that would overlap it left out."""
    if seconds < POOL_CHANGE_LASTS + 10:
        return faults
    at = round(random.Random(f"{seed}:pool").uniform(2.0, max(2.0, seconds / 2 - POOL_CHANGE_LASTS / 2)), 1)
    ends = at + POOL_CHANGE_LASTS
    kept = [f for f in faults if f.target != "memcached" or f.at + f.lasts + 1 < at or f.at > ends + 1]
    return sorted([*kept, Fault(at, POOL_CHANGE, "memcached", POOL_CHANGE_LASTS)], key=lambda f: f.at)


class Nemesis(threading.Thread):
    """Runs a schedule against the farm; `stalled` says which web node was
    stopped when (a request to it then waits, and is not held against it)."""

    def __init__(self, farm: Farm, faults: list[Fault], started: float) -> None:
        super().__init__(name="nemesis", daemon=True)
        self.farm, self.faults, self.started = farm, faults, started
        self.lock = threading.Lock()
        self.windows: list[tuple[str, float, float]] = []  # (target, from, to), monotonic
        self.kinds: list[tuple[str, float, float]] = []  # (kind, from, to), monotonic
        self.errors: list[str] = []
        self.halted = threading.Event()

    def run(self) -> None:
        for fault in self.faults:
            delay = self.started + fault.at - time.monotonic()
            if self.halted.wait(max(delay, 0.0)):
                return
            begun = time.monotonic()
            try:
                self._inject(fault)
            except Exception as exc:  # a fault that could not be healed is the run's failure
                self.errors.append(f"{fault}: {exc!r}")
            with self.lock:
                if fault.kind not in STILL_ANSWERS:
                    self.windows.append((fault.target, begun, time.monotonic()))
                self.kinds.append((fault.kind, begun, time.monotonic()))

    def _inject(self, fault: Fault) -> None:
        farm, role = self.farm, "worker" if fault.target in WORKERS else "web"
        if fault.kind == POOL_CHANGE:
            left = farm.change_pool()
            if left:
                raise RuntimeError(f"the removed server still holds {len(left)} keys: {left[:5]}")
        elif fault.kind.startswith(("unplug", "cut")):
            self._network(fault)
        elif fault.kind == "restart-memcached":
            farm.restart_memcached()
        elif fault.kind == "fill-memcached":
            filler = farm.fill_memcached(int(fault.at * 10), fault.lasts)
            try:
                self.halted.wait(fault.lasts)
            finally:
                farm.empty_memcached(filler)
        elif fault.kind.startswith("kill"):
            farm.signal(role, fault.target, signal.SIGKILL)
            self.halted.wait(fault.lasts)
            farm.process(role, fault.target).stop()
            if self.halted.is_set():
                return  # the run is over: nothing is started that its cleanup has passed
            if role == "worker":
                farm.start_worker(fault.target)
            else:
                farm.start_node(fault.target)
        else:
            farm.signal(role, fault.target, signal.SIGSTOP)
            try:
                self.halted.wait(fault.lasts)
            finally:
                farm.signal(role, fault.target, signal.SIGCONT)

    def halt(self) -> None:
        """Stop at once, healing the fault under way: before the run stops its
        processes, so none is started again behind its cleanup."""
        self.halted.set()
        if self.is_alive():
            self.join(timeout=120)

    def _network(self, fault: Fault) -> None:
        lan = self.farm.lan
        assert lan is not None, f"{fault.kind} needs a farm of hosts"
        if fault.kind.startswith("unplug"):
            lan.unplug(fault.target)
            try:
                self.halted.wait(fault.lasts)
            finally:
                lan.plug(fault.target)
        else:
            lan.cut(fault.target, "memcached")
            try:
                self.halted.wait(fault.lasts)
            finally:
                lan.mend(fault.target, "memcached")

    def restarts(self) -> list[float]:
        """When memcached was restarted (monotonic)."""
        with self.lock:
            return [start for kind, start, _ in self.kinds if kind == "restart-memcached"]

    def faulted(self, target: str, begun: float, ended: float) -> bool:
        """Whether `target` was down or stalled at some moment of [begun, ended]."""
        with self.lock:
            return any(t == target and start <= ended and begun <= stop for t, start, stop in self.windows)
