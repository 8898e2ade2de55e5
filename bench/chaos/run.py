"""One chaos run, from its seed: the farm, the workload and the nemesis at
once, then the checker."""

import json
import shutil
import tempfile
import threading
import time
from pathlib import Path

from bench.chaos.checker import Outcome, check
from bench.chaos.farm import NODES, WORKERS, Farm, farm_env
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
            mc, address = processes.memcached(base)
            started.append(mc)
            env = farm_env(base, address, database)
            processes.manage(env, "migrate", "--no-input", "-v", "0")
            processes.manage(env, "seed_demo", "-v", "0")
            farm = Farm(base, env, mc, int(address.rsplit(":", 1)[1]), started=started)
            farm.shell(
                "from django.contrib.auth import get_user_model\nusers = get_user_model().objects\n"
                + f"pw = {env['DEMO_PASSWORD']!r}\n"
                + "".join(
                    f"users.filter(username={u!r}).exists() or users.create_user({u!r}, password=pw)\n"
                    for u in USERS
                )
                + "print('ok')"
            )
            poll, choices = json.loads(
                farm.shell(
                    "import json\nfrom webfarm.polls.models import Poll\n"
                    "p = Poll.objects.create(question='Chaos?')\n"
                    "ids = [p.choices.create(text=t, position=i).id for i, t in enumerate('ab')]\n"
                    "print(json.dumps([p.id, ids]))"
                )
            )
            for node in NODES:
                farm.start_node(node)
            started.append(processes.celery_beat(env, base, "beat"))
            for worker in WORKERS:
                farm.start_worker(worker)
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
            print(f"workload over after {time.monotonic() - begun:.0f} s; checking", flush=True)
            outcome = check(farm, history, nemesis, offsets, seed)
    finally:
        if keep is not None and outcome.violations:
            shutil.copytree(
                base, keep / f"seed-{seed}", dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.db")
            )
        shutil.rmtree(base, ignore_errors=True)
    return outcome


def report(seed: int, outcome: Outcome) -> str:
    lines = [f"chaos run, seed {seed}: {'PASSED' if not outcome.violations else 'FAILED'}"]
    lines += [f"  {name}: {value}" for name, value in outcome.figures.items()]
    lines += [f"  VIOLATION {what}" for what in outcome.violations[:50]]
    if len(outcome.violations) > 50:
        lines.append(f"  ... and {len(outcome.violations) - 50} more")
    return "\n".join(lines)
