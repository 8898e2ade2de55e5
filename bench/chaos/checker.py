"""The invariants of a chaos run, read from its history and from the farm
once every fault is healed."""

import csv
import io
import json
import random
import re
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench.chaos.farm import NODES, WORKERS, Farm, own_queue
from bench.chaos.nemesis import Nemesis
from bench.chaos.workload import IMPORT_KIND, Browser, History, imported_rows
from tests.harness import processes
from tests.harness.web import flush_votes

FINAL = {"succeeded", "failed", "cancelled", "lost"}
# Seconds every job has to end once the faults are over.
SETTLE = 240.0
# A request answered later than this, by a node that was neither killed nor
# stalled meanwhile, is a failure (the farm's memcached timeouts are 0.5 s
# to connect and 2 s to answer; a poll asks memcached at most twice).
ANSWER_WITHIN = 10.0
# Seconds after a node's fault in which a request to it may go unanswered: a
# client's kept-alive connection to the killed process fails once, when it
# is next used (a browser sends the request again on a new one).
DEAD_CONNECTIONS = 10.0
# Seconds a live worker has to take a task once the faults are over.
DEAF_AFTER = 60.0
# What each worker is sent on its own queue: a no-op without QUEUES_MIRRORS,
# and not beat's, so its log shows it (demofarm/logfilters.py hides beat's).
PROBE_TASK = "webfarm.queues.repair_mirrors"
# Seconds a part's start may follow the cancel a node took: a worker that
# looked a moment before the cancel was written writes its start just after.
CANCEL_SLACK = 0.5
# Seconds a flush may take beyond POLLS_FLUSH_EVERY (a vote accepted this
# long before a memcached restart may still have been in its queue).
VOTE_FLUSH_SLACK = 2.0


@dataclass
class Outcome:
    figures: dict = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    def fail(self, what: str) -> None:
        self.violations.append(what)
        print(f"  violated: {what}", flush=True)

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            took = self.figures.setdefault("seconds", {})[phase] = round(time.monotonic() - began, 1)
            # Said as it ends: a run stopped by a timeout shows where its time went.
            print(f"  {phase}: {took} s", flush=True)


def jobs_of(farm: Farm) -> dict[str, dict]:
    """Every job the database holds, with its parts' times."""
    out = farm.shell(
        "import json\nfrom webfarm.progress.models import Job\n"
        "jobs = {}\n"
        "for j in Job.objects.select_related('owner').prefetch_related('parts'):\n"
        "    jobs[j.id] = dict(state=j.state, owner=j.owner.username, kind=j.kind, params=j.params,\n"
        "        error=j.error, result_url=j.result_url,\n"
        "        finished=j.finished_at.timestamp() if j.finished_at else None,\n"
        "        parts_started=[p.started_at.timestamp() for p in j.parts.all() if p.started_at])\n"
        "print(json.dumps(jobs))"
    )
    return json.loads(out)


def check(
    farm: Farm, history: History, nemesis: Nemesis, log_offsets: dict[str, int], seed: int, outcome: Outcome
) -> Outcome:
    for error in nemesis.errors:
        outcome.fail(f"a fault was not healed: {error}")
    with outcome.timed("deaf probe"):
        _workers_take_tasks(farm, log_offsets, outcome)
    with outcome.timed("settle"):
        jobs = _settled(farm, outcome)
    _jobs(jobs, history, outcome)
    with outcome.timed("imports"):
        _imports(farm, jobs, outcome)
    with outcome.timed("logins"):
        browsers = _browsers(farm, history, jobs, seed)
    with outcome.timed("nodes agree"):
        _nodes_agree(jobs, browsers, outcome)
    with outcome.timed("results"):
        _results(jobs, browsers, outcome)
    _requests(history, nemesis, outcome)
    with outcome.timed("votes"):
        _votes(farm, history, nemesis, outcome)
    with outcome.timed("dead letters"):
        _dead_letters(farm, outcome)
    return outcome


def _settled(farm: Farm, outcome: Outcome) -> dict[str, dict]:
    deadline = time.monotonic() + SETTLE
    while True:
        jobs = jobs_of(farm)
        open_jobs = [job for job, row in jobs.items() if row["state"] not in FINAL]
        if not open_jobs or time.monotonic() > deadline:
            break
        time.sleep(2)
    for job in open_jobs:
        outcome.fail(f"job {job} still {jobs[job]['state']} {SETTLE:.0f} s after the last fault")
    return jobs


def _jobs(jobs: dict[str, dict], history: History, outcome: Outcome) -> None:
    states: dict[str, int] = {}
    for row in jobs.values():
        states[row["state"]] = states.get(row["state"], 0) + 1
    outcome.figures["jobs accepted (202)"] = len(history.accepted)
    outcome.figures["jobs in the database"] = len(jobs)
    outcome.figures["job states"] = dict(sorted(states.items()))
    outcome.figures["cancels asked"] = len(history.cancel_asked)
    outcome.figures["lost, and why"] = {
        job: row["error"][:120] for job, row in jobs.items() if row["state"] == "lost"
    }
    failed = Counter(row["error"][:120] for row in jobs.values() if row["state"] == "failed")
    outcome.figures["failed, and why"] = dict(failed)
    for job in history.accepted:
        if job not in jobs:
            outcome.fail(f"job {job} was accepted (202) and the database does not know it")
    for job, row in jobs.items():
        if row["state"] == "cancelled" and job not in history.cancel_asked:
            outcome.fail(f"job {job} was cancelled and nobody asked")
        if row["state"] == "cancelled":
            # No part starts once a node said it took the cancel, nor after the job ended.
            seen = min(history.cancel_taken.get(job, float("inf")), row["finished"] or float("inf"))
            late = [t for t in row["parts_started"] if t > seen + CANCEL_SLACK]
            if late:
                outcome.fail(f"job {job}: {len(late)} parts started after its cancel was taken")


def _imports(farm: Farm, jobs: dict[str, dict], outcome: Outcome) -> None:
    """Each uploaded file saved all its good rows once, or none: all if one
    of its jobs (a retry runs it again) succeeded, none if none did, and no
    customer twice (an import run twice, or two runs at once, saves once)."""
    tags: dict[str, list[str]] = {}
    for row in jobs.values():
        if row["kind"] == IMPORT_KIND:
            tags.setdefault(row["params"]["name"].removesuffix(".csv"), []).append(row["state"])
    if not tags:
        return
    counted = json.loads(
        farm.shell(
            "import json\nfrom demofarm.reports.models import Customer\n"
            f"tags = {sorted(tags)!r}\n"
            "emails = Customer.objects.values_list('email', flat=True)\n"
            "rows = {t: list(emails.filter(email__startswith=t + '-')) for t in tags}\n"
            "print(json.dumps({t: [len(r), len(set(r))] for t, r in rows.items()}))"
        )
    )
    good = imported_rows()
    for tag, states in sorted(tags.items()):
        saved, distinct = counted[tag]
        if saved != distinct:
            outcome.fail(f"import {tag}: {saved - distinct} customers saved twice")
        if "succeeded" in states and distinct != good:
            outcome.fail(f"import {tag} succeeded ({states}) with {distinct} customers saved of {good}")
        if "succeeded" not in states and distinct not in (0, good):
            outcome.fail(f"import {tag} ({states}) saved {distinct} customers: neither all nor none")
    outcome.figures["imports (files), succeeded"] = [
        len(tags),
        sum(1 for states in tags.values() if "succeeded" in states),
    ]


def _browsers(farm: Farm, history: History, jobs: dict[str, dict], seed: int) -> dict[str, Browser]:
    rng = random.Random(seed)
    browsers = {}
    for user in sorted({row["owner"] for row in jobs.values()}):
        browser = Browser(farm, user, History(), rng)
        assert browser.login(time.monotonic() + 30), f"{user} cannot log in after the faults"
        browsers[user] = browser
    return browsers


def _nodes_agree(jobs: dict[str, dict], browsers: dict[str, Browser], outcome: Outcome) -> None:
    """Every node answers every job's final state, the database's, and again a moment later."""
    for round_ in range(2):
        for job, row in jobs.items():
            for node in NODES:
                browser = browsers[row["owner"]]
                # Sent again once, as a browser does, when a kept-alive
                # connection the node closed meanwhile gives no answer.
                answer = browser.once(node, "check", "GET", f"/progress/{job}/") or browser.once(
                    node, "check", "GET", f"/progress/{job}/"
                )
                state = (
                    answer.json().get("state") if answer is not None and answer.status_code == 200 else None
                )
                if state != row["state"]:
                    said = "no answer" if answer is None else f"{answer.status_code} {answer.text[:100]}"
                    outcome.fail(
                        f"job {job}: {node} says {state!r} ({said}), the database {row['state']!r} "
                        f"(round {round_})"
                    )
        time.sleep(1)


def _csv(browser: Browser, url: str) -> list[tuple[str, ...]] | None:
    answer = browser.once(NODES[0], "result", "GET", url)
    if answer is None or answer.status_code != 200:
        return None
    return [tuple(row) for row in csv.reader(io.StringIO(answer.text))]


def _results(jobs: dict[str, dict], browsers: dict[str, Browser], outcome: Outcome) -> None:
    """A succeeded job's result is the one a quiet farm computes for the same
    report, with no row twice."""
    done = {job: row for job, row in jobs.items() if row["state"] == "succeeded" and row["result_url"]}
    reports = {_which(row): (row["kind"], row["params"]) for row in done.values()}
    # The quiet farm's runs at once, each by another user (a user's limit is 3).
    users = list(browsers.values())
    quiet = {
        which: _start(users[i % len(users)], kind, params)
        for i, (which, (kind, params)) in enumerate(reports.items())
    }
    reference = {which: _finished(*started) if started else None for which, started in quiet.items()}
    for job, row in done.items():
        got = _csv(browsers[row["owner"]], row["result_url"])
        if got is None:
            outcome.fail(f"job {job}: its result {row['result_url']} cannot be read")
            continue
        if len(set(got)) != len(got):
            outcome.fail(f"job {job}: its result has a row twice")
        which = _which(row)
        if reference[which] is None:
            outcome.fail(f"the quiet farm could not compute {which}")
        elif got != reference[which]:
            outcome.fail(f"job {job}: its result differs from the quiet farm's for {which}")
    outcome.figures["results compared with a quiet farm's"] = len(done)


def _which(row: dict) -> str:
    return json.dumps([row["kind"], row["params"]], sort_keys=True)


def _start(browser: Browser, kind: str, params: dict) -> tuple[Browser, str] | None:
    started = browser.call("start", "POST", f"/reports/{kind}/", data=params)
    if started is None or started.status_code != 202:
        return None
    return browser, started.json()["job"]


def _finished(browser: Browser, job: str) -> list[tuple[str, ...]] | None:
    deadline = time.monotonic() + SETTLE
    while time.monotonic() < deadline:
        polled = browser.call("poll", "GET", f"/progress/{job}/")
        if polled is not None and polled.status_code == 200 and polled.json()["final"]:
            document = polled.json()
            return _csv(browser, document["result_url"]) if document["state"] == "succeeded" else None
        time.sleep(0.5)
    return None


def _requests(history: History, nemesis: Nemesis, outcome: Outcome) -> None:
    statuses: dict[str, int] = {}
    for call in history.calls:
        key = f"{call.what} {call.status if call.status is not None else 'no answer'}"
        statuses[key] = statuses.get(key, 0) + 1
        ended = call.began + call.took
        faulted = nemesis.faulted(call.node, call.began, ended)
        if call.status is None:
            # A kept-alive connection to a killed process fails when next used.
            faulted = nemesis.faulted(call.node, call.began - DEAD_CONNECTIONS, ended)
        if call.status is not None and call.status >= 500 and not (call.status == 503 and call.retry_after):
            outcome.fail(f"{call.what} on {call.node} answered {call.status}")
        if not faulted and (call.status is None or call.took > ANSWER_WITHIN):
            answer = call.error or call.status
            # When, in the run's seconds, so it can be read beside the schedule.
            at = call.began - nemesis.started
            outcome.fail(
                f"{call.what} on {call.node}, not faulted, took {call.took:.1f} s"
                f" (from {at:.1f} s to {at + call.took:.1f} s): {answer}"
            )
    outcome.figures["requests by status"] = dict(sorted(statuses.items()))


def _votes(farm: Farm, history: History, nemesis: Nemesis, outcome: Outcome) -> None:
    """Stored votes: every accepted one, less those a memcached restart took
    before the flusher stored them (docs/polls.md: a memcached without a
    mirror loses the votes of its last POLLS_FLUSH_EVERY seconds), plus at
    most each vote that got no answer."""
    deadline = time.monotonic() + 60
    while not flush_votes(farm.env) and time.monotonic() < deadline:
        time.sleep(1)
    code = (
        "import json\nfrom demofarm.polls.models import Vote\n"
        "print(json.dumps([*Vote.objects.values_list('voter', flat=True)]))"
    )
    voters = set(json.loads(farm.shell(code)))
    stored = len(voters)
    restarts = nemesis.restarts()
    exposed = float(farm.env["POLLS_FLUSH_EVERY"]) + VOTE_FLUSH_SLACK
    at_risk = sum(1 for t in history.votes_accepted if any(t <= r <= t + exposed for r in restarts))
    accepted = len(history.votes_accepted)
    low, high = accepted - at_risk, accepted + history.votes_unanswered
    outcome.figures["votes accepted, unanswered, stored"] = [accepted, history.votes_unanswered, stored]
    outcome.figures["votes a memcached restart could take"] = at_risk
    if not low <= stored <= high:
        said = f"{accepted} accepted, {at_risk} of them at risk, {high - accepted} unanswered"
        outcome.fail(f"votes: {stored} stored; {said}")
    # Which were lost: how each was taken, and when against the restarts.
    lost = sorted((when, via) for voter, (via, when) in history.voters.items() if voter not in voters)
    if lost:
        outcome.figures["votes lost: how taken, seconds to each restart"] = [
            f"{via} {', '.join(f'{when - r:+.1f}' for r in restarts)}" for when, via in lost
        ]
        wall = time.time() - time.monotonic()  # a monotonic moment + this: the wall clock's
        outcome.figures["votes lost: seconds into the run, wall clock"] = [
            f"{when - nemesis.started:.1f} {time.strftime('%H:%M:%S', time.localtime(wall + when))}"
            for when, _ in lost
        ]


def _dead_letters(farm: Farm, outcome: Outcome) -> None:
    counts = {}
    for queue in (farm.env["CELERY_TASK_DEFAULT_QUEUE"], "sitelog", "poll-votes"):
        try:
            shown = processes.manage(farm.env, "dead_letters", queue, "--limit", "5")
        except RuntimeError as exc:
            shown = str(exc)
        found = re.search(r"(\d+) dead letters of", shown)
        counts[queue] = int(found.group(1)) if found else shown.strip()[-200:]
        reasons = re.findall(r": (.+)\n", shown)
        if reasons:
            counts[f"{queue} reasons"] = sorted(set(reasons))[:5]
    outcome.figures["dead letters"] = counts


def _workers_take_tasks(farm: Farm, log_offsets: dict[str, int], outcome: Outcome) -> None:
    """Every worker takes a task again after the last fault: none went deaf.
    Each is sent PROBE_TASK on its own queue (a worker that cannot take a
    task takes none from any queue); its log says when it took it."""
    sends = "".join(f"app.send_task({PROBE_TASK!r}, queue={own_queue(name)!r})\n" for name in WORKERS)
    farm.shell(f"from demofarm.celery import app\n{sends}print('sent')")
    deadline = time.monotonic() + DEAF_AFTER
    waiting = set(WORKERS)
    while waiting and time.monotonic() < deadline:
        for name in list(waiting):
            log = Path(farm.workers[name].log_path).read_bytes()[log_offsets.get(name, 0) :]
            if f"Task {PROBE_TASK}[".encode() in log:
                waiting.discard(name)
        time.sleep(0.5)
    for name in sorted(waiting):
        outcome.fail(f"worker {name} took no task in the {DEAF_AFTER:.0f} s after the last fault")
