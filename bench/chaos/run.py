"""One chaos run, from its seed: the farm, the workload and the nemesis at
once, then the checker."""

import json
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.chaos.checker import Outcome, check
from bench.chaos.farm import MEMCACHED_FLAGS, MEMCACHED_MB, NODES, WORKERS, Farm, farm_env
from bench.chaos.nemesis import Nemesis, schedule
from bench.chaos.workload import FOLLOW_AT_MOST, USERS, History, user_loop, voter_loop
from tests.harness import processes


def run(seed: int, minutes: float, keep: Path | None = None) -> Outcome:
    """One run. `keep`: where the processes' logs are copied when it fails."""
    seconds = minutes * 60
    faults = schedule(seed, seconds)
    print(f"chaos run: seed {seed}, {minutes:g} minutes, {len(faults)} faults", flush=True)
    for fault in faults:
        print(f"  {fault}", flush=True)
    base = Path(tempfile.mkdtemp(prefix="chaos-"))
    outcome = Outcome()
    try:
        with processes.postgres_database("chaos") as database, processes.stopped_after() as started:
            with outcome.timed("setup"):
                farm, poll, choices = _farm(base, database, started)
            history = History()
            begun = time.monotonic()
            until = begun + seconds
            nemesis = Nemesis(farm, faults, begun)
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
            shutil.copytree(
                base, keep / f"seed-{seed}", dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.db")
            )
        shutil.rmtree(base, ignore_errors=True)
    return outcome


def _farm(base: Path, database: str, started: list[processes.Process]) -> tuple[Farm, int, list[int]]:
    """The farm, its users and a poll to vote in; its processes started at once."""
    mc, address = processes.memcached(base, memory_mb=MEMCACHED_MB, extra=MEMCACHED_FLAGS)
    started.append(mc)
    env = farm_env(base, address, database)
    processes.manage(env, "migrate", "--no-input", "-v", "0")
    farm = Farm(base, env, mc, int(address.rsplit(":", 1)[1]), started=started)
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
            "from webfarm.polls.models import Poll\n"
            "p = Poll.objects.create(question='Chaos?')\n"
            "ids = [p.choices.create(text=t, position=i).id for i, t in enumerate('ab')]\n"
            "print(json.dumps([p.id, ids]))"
        )
    )
    for node in NODES:  # chosen one after another: two at once could be given the same port
        farm.ports[node] = processes.free_port()
    starts = [lambda node=node: farm.start_node(node) for node in NODES]
    starts += [lambda worker=worker: farm.start_worker(worker) for worker in WORKERS]
    starts.append(lambda: started.append(processes.celery_beat(env, base, "beat")))
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
