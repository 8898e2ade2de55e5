"""One chaos run, from its seed: the farm, the workload and the nemesis at
once, then the checker."""

import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path

from bench.chaos.checker import Outcome, check
from bench.chaos.farm import (
    BEAT_HOST,
    HOSTS,
    HOUSEKEEPING,
    NODES,
    WORKERS,
    Farm,
    farm_env,
    on,
    start_memcached,
)
from bench.chaos.nemesis import Nemesis, schedule
from bench.chaos.workload import FOLLOW_AT_MOST, USERS, History, user_loop, voter_loop
from tests.harness import hosts, processes

DATABASE = "chaos"
# Where a failed run leaves its processes' logs (var/ is not in the repository).
KEPT = Path(__file__).resolve().parents[2] / "var" / "chaos"


def run(
    seed: int, minutes: float, keep: Path | None = None, *, network: bool = False, pool_change: bool = False
) -> Outcome:
    """One run. `keep`: where the processes' logs are copied when it fails;
    `network`: each process on a host of its own, and network faults;
    `pool_change`: with network, memcached's pool grown and shrunk back."""
    seconds = minutes * 60
    faults = schedule(seed, seconds, network=network, pool_change=pool_change)
    where = "on hosts" if network else "on the loopback"
    print(f"chaos run {where}: seed {seed}, {minutes:g} minutes, {len(faults)} faults", flush=True)
    for fault in faults:
        print(f"  {fault}", flush=True)
    base = Path(tempfile.mkdtemp(prefix="chaos-"))
    outcome = Outcome()
    try:
        with ExitStack() as stack:
            lan = None
            if network:
                lan = stack.enter_context(hosts.lan(HOSTS))
                # This thread, the threads it starts and their subprocesses are the client host.
                stack.enter_context(lan.inside("client"))
            database = stack.enter_context(_database(lan))
            started = stack.enter_context(processes.stopped_after())
            with outcome.timed("setup"):
                farm, poll, choices = _farm(base, database, started, lan)
            history = History()
            begun = time.monotonic()
            until = begun + seconds
            nemesis = Nemesis(farm, faults, begun)
            stack.callback(nemesis.halt)  # on any way out, before the processes are stopped
            loops = [
                threading.Thread(target=user_loop, args=(farm, user, history, seed, until), daemon=True)
                for user in USERS
            ]
            loops.append(
                threading.Thread(
                    target=voter_loop, args=(farm, poll, choices, history, seed, until), daemon=True
                )
            )
            nemesis.start()
            for loop in loops:
                loop.start()
            nemesis.join(timeout=seconds + 120)
            for loop in loops:
                loop.join(timeout=max(0.0, until - time.monotonic()) + FOLLOW_AT_MOST)
            offsets = {name: farm.workers[name].log_path.stat().st_size for name in WORKERS}
            outcome.figures.setdefault("seconds", {})["workload"] = round(time.monotonic() - begun, 1)
            print(f"workload over after {time.monotonic() - begun:.0f} s; checking", flush=True)
            check(farm, history, nemesis, offsets, seed, outcome)
    finally:
        if keep is not None and outcome.violations:
            kept = keep / f"seed-{seed}"
            shutil.copytree(base, kept, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.db"))
            outcome.figures["logs kept in"] = str(kept)
        shutil.rmtree(base, ignore_errors=True)
    return outcome


@contextmanager
def _database(lan: hosts.Lan | None) -> Iterator[str]:
    """A new PostgreSQL database: on the run's server, or on the `db` host."""
    if lan is None:
        with processes.postgres_database(DATABASE) as url:
            yield url
        return
    # Not in the run's directory: the postgres user must be able to enter it.
    db_dir = Path(tempfile.mkdtemp(prefix="chaos-db-"))
    address = lan.addresses["db"]
    with processes.stopped_after(db_dir) as started:
        trust = f"{hosts.SUBNET}.0/{hosts.PREFIX}"
        started.append(
            processes.start_postgres(db_dir, listen=address, port=5432, trust=trust, wrap=on(lan, "db"))
        )
        createdb = ["runuser", "-u", "postgres", "--", "createdb", "-h", str(db_dir), DATABASE]
        lan.run("db", createdb, env=dict(os.environ))
        yield f"postgresql://postgres@{address}:5432/{DATABASE}"


def _farm(
    base: Path, database: str, started: list[processes.Process], lan: hosts.Lan | None
) -> tuple[Farm, int, list[int]]:
    """The farm, its users and a poll to vote in; its processes started at once."""
    mc, address = start_memcached(base, lan)
    started.append(mc)
    env = farm_env(base, address, database, lan)
    processes.manage(env, "migrate", "--no-input", "-v", "0")
    farm = Farm(base, env, mc, int(address.rsplit(":", 1)[1]), started=started, lan=lan)
    users = "".join(
        f"users.filter(username={u!r}).exists() or users.create_user({u!r}, password=pw)\n" for u in USERS
    )
    # seed_demo's orders and the chaos users and poll in one shell: each manage.py starts Django anew.
    poll, choices = json.loads(
        farm.shell(
            "import json\nfrom django.core.management import call_command\n"
            "call_command('seed_demo', verbosity=0)\n"
            "from django.contrib.auth import get_user_model\nusers = get_user_model().objects\n"
            f"pw = {env['DEMO_PASSWORD']!r}\n{users}"
            "from demofarm.polls.models import Poll\n"
            "p = Poll.objects.create(question='Chaos?')\n"
            "ids = [p.choices.create(text=t, position=i).id for i, t in enumerate('ab')]\n"
            "print(json.dumps([p.id, ids]))"
        )
    )
    for node in NODES:  # chosen one after another: two at once could be given the same port
        farm.ports[node] = processes.free_port()
    starts = [lambda node=node: farm.start_node(node) for node in NODES]
    starts += [lambda worker=worker: farm.start_worker(worker) for worker in WORKERS]
    starts.append(lambda: started.append(processes.celery_beat(env, base, "beat", wrap=farm.on(BEAT_HOST))))
    starts.append(
        lambda: started.append(
            processes.celery_worker(
                env, base, HOUSEKEEPING, concurrency=1, queues=HOUSEKEEPING, wrap=farm.on(BEAT_HOST)
            )
        )
    )
    with ThreadPoolExecutor(len(starts)) as pool:
        for done in [pool.submit(start) for start in starts]:
            done.result()
    return farm, poll, choices


def report(seed: int, outcome: Outcome) -> str:
    lines = [f"chaos run, seed {seed}: {'PASSED' if not outcome.violations else 'FAILED'}"]
    lines += [f"  {name}: {value}" for name, value in outcome.figures.items()]
    lines += [f"  VIOLATION {what}" for what in outcome.violations[:50]]
    if len(outcome.violations) > 50:
        lines.append(f"  ... and {len(outcome.violations) - 50} more")
    return "\n".join(lines)
