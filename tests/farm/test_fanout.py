"""One job, many workers (docs/jobs.md), on real processes: PostgreSQL, one
memcached (store and broker), a web node, beat running the reaper every
second, and two Celery workers of one process each. Jobs are split in parts
that run at once on both; one combined bar; a worker killed under a part;
a cancel; a part that fails; limits that count the job once."""

import csv
import io
import json
import re
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.harness import processes
from tests.harness.web import DEMO_PASSWORD, WebClient

pytestmark = pytest.mark.farm

ALL_DATES = {"date_from": "2024-01-01", "date_to": "2025-12-31"}
STEP_SECONDS = 0.5  # how long a part of split-sleep waits between two updates


@dataclass
class Fanout:
    dir: Path
    env: dict
    node: str
    memcached: processes.Process
    memcached_address: str
    workers: dict[str, processes.Process] = field(default_factory=dict)
    others: list = field(default_factory=list)

    def client(self, username: str = "alice") -> WebClient:
        return WebClient(self.node).login(username)

    def worker(self, name: str) -> processes.Process:
        worker = processes.celery_worker(
            self.env, self.dir, name, concurrency=1, include="tests.harness.split_jobs"
        )
        self.workers[name] = worker
        self.others.append(worker)
        return worker

    def shell(self, code: str) -> str:
        return processes.manage(self.env, "shell", "-c", code).strip().splitlines()[-1]

    def start_split(self, username: str, **params: object) -> str:
        """Start a split-sleep job (tests/harness/split_jobs.py); its id, or the
        refusal. With params["hold"], its parts wait until `release` of that name."""
        return self.shell(
            "import tests.harness.split_jobs as s\n"
            "from django.contrib.auth import get_user_model\n"
            "from webfarm.progress.launching.admission import StartRefused\n"
            f"user = get_user_model().objects.get(username={username!r})\n"
            + (f"s.hold({params['hold']!r})\n" if "hold" in params else "")
            + "try:\n"
            f"    print(s.split_sleep.start(user=user, params={params!r}).id)\n"
            "except StartRefused as exc:\n"
            "    print('refused:', exc.message)\n"
        )

    def release(self, hold: str) -> None:
        self.shell(f"import tests.harness.split_jobs as s\ns.release({hold!r})\nprint('released')")

    def parts(self, job: str) -> list[dict]:
        """The job's part rows: index, state, worker, attempt, started."""
        return json.loads(
            self.shell(
                "import json\nfrom webfarm.progress.models import JobPart\n"
                "print(json.dumps([dict(index=p.index, state=p.state, worker=p.worker, attempt=p.attempt,"
                f" started=p.started_at is not None) for p in JobPart.objects.filter(job_id={job!r})]))"
            )
        )

    def notes(self, job: str) -> dict[str, list[str]]:
        """What split-sleep's parts and merges noted in memcached: who ran what."""
        return json.loads(
            self.shell(
                "import json\nfrom webfarm.core.client import get_client\n"
                f"keys = ['splittest:{job}:merge'] + [f'splittest:{job}:{{w}}{{n}}' for n in range(16)"
                " for w in ('part', 'steps')]\n"
                "found = get_client().get_many(keys)\n"
                "print(json.dumps({k.rsplit(':', 1)[1]: v.decode().rstrip(',').split(',')"
                " for k, v in found.items()}))"
            )
        )


@pytest.fixture(scope="module")
def fanout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fanout]:
    base = tmp_path_factory.mktemp("fanout")
    with processes.postgres_database("fanout") as database, processes.stopped_after() as started:
        mc, address = processes.memcached(base)
        started.append(mc)
        env = processes.one_memcached_env(
            base,
            address,
            "fanout",
            DATABASE_URL=database,
            CELERY_BROKER_VISIBILITY_TIMEOUT=4,
            DEMO_ORDERS=60000,
            # About 4 parts of 200 queries each: long enough to watch both workers at it.
            REPORTS_CHUNK_ROWS=200,
            REPORTS_PART_ROWS=40000,
            PROGRESS_HEARTBEAT_INTERVAL=1,
            REAP_EVERY=1,
            REPORTS_PER_USER=10,
        )
        processes.migrated_and_seeded(env)
        web, url = processes.gunicorn(env, base, "fanout-node")
        started.append(web)
        started.append(processes.celery_beat(env, base, "fanout-beat"))
        farm = Fanout(dir=base, env=env, node=url, memcached=mc, memcached_address=address)
        farm.worker("w1")
        farm.worker("w2")
        yield farm
        started.extend(farm.others)


def _follow(client: WebClient, job: str, *, timeout: float = 120) -> list[dict]:
    """Every progress document a poll saw, until the job's final one."""
    seen: list[dict] = []

    def final() -> bool:
        seen.append(client.progress(job))
        return seen[-1]["final"]

    processes.wait_for(final, timeout=timeout, interval=0.1, what=f"job {job} to end")
    return seen


def test_a_split_report_runs_on_both_workers_behind_one_bar_and_adds_up(fanout):
    alice = fanout.client()
    job = alice.start_report("sales-by-region", ALL_DATES)["job"]
    seen = _follow(alice, job)
    final = seen[-1]
    assert final["state"] == "succeeded", final
    assert final["parts"]["done"] == final["parts"]["total"] >= 3
    # One bar: both workers at once, and a percent that never goes back.
    assert any(doc["parts"] and len(doc["parts"]["workers"]) == 2 for doc in seen), seen
    assert any(doc["parts"] and doc["parts"]["queued"] and doc["parts"]["running"] for doc in seen)
    percents = [doc["percent"] for doc in seen if doc["percent"] is not None]
    assert percents == sorted(percents) and 0 < percents[len(percents) // 2] < 100
    parts = fanout.parts(job)
    assert {p["state"] for p in parts} == {"succeeded"} and len(
        {p["worker"].split("#")[0] for p in parts}
    ) == 2
    # Added up right: an order whose lines two parts read is counted once.
    response = alice.get(final["result_url"])
    rows = list(csv.DictReader(io.StringIO(response.text)))
    orders = fanout.shell(
        "from demofarm.reports.models import Order\n"
        f"print(Order.objects.filter(placed_on__gte={ALL_DATES['date_from']!r},"
        f" placed_on__lte={ALL_DATES['date_to']!r}, lines__isnull=False).distinct().count())"
    )
    assert sum(int(row["orders"]) for row in rows) == int(orders)


def test_a_part_whose_worker_dies_runs_again_alone(fanout):
    alice = fanout.client()
    # Held until w1 is dead: a part lasts seconds, and on a loaded machine a
    # read of the rows (a manage.py process) took nine, by when w1's parts
    # had all ended.
    job = fanout.start_split("alice", parts=4, seconds=10 * STEP_SECONDS, hold="alice")
    alice.wait_until(job, lambda p: p["parts"]["running"] == 2, what="a part on each worker")
    w1 = fanout.workers["w1"]
    on_w1 = [p for p in fanout.parts(job) if p["state"] == "running" and p["worker"].startswith("w1@")]
    assert len(on_w1) == 1, on_w1
    w1.stop(signal.SIGKILL)
    fanout.release("alice")
    fanout.worker("w3")
    seen = _follow(alice, job)
    assert seen[-1]["state"] == "succeeded" and seen[-1]["message"] == "4 parts, sum 6", seen[-1]
    attempts = {p["index"]: p["attempt"] for p in fanout.parts(job)}
    dead = on_w1[0]["index"]
    assert attempts == {n: 2 if n == dead else 1 for n in range(4)}
    notes = fanout.notes(job)
    # The dead part ran twice; every other part once, and the merge once.
    assert [run.split("@")[1] for run in notes[f"part{dead}"]] == ["1", "2"]
    assert all(len(notes[f"part{n}"]) == 1 for n in range(4) if n != dead)
    assert len(notes["merge"]) == 1


def test_a_cancel_stops_every_part_at_its_next_update(fanout):
    alice = fanout.client()
    job = fanout.start_split("alice", parts=6, seconds=10 * STEP_SECONDS * 4)
    alice.wait_until(job, lambda p: p["parts"]["running"] == 2, what="a part on each worker")
    assert alice.post(f"/progress/{job}/cancel/", headers={"Accept": "application/json"}).status_code == 202
    cancelled_at = time.time()  # the cancel flag is set: the parts' clock is this machine's
    processes.wait_for(
        lambda: all(p["state"] != "running" for p in fanout.parts(job)), timeout=30, what="every part stopped"
    )
    final = _follow(alice, job)[-1]
    assert final["state"] == "cancelled"
    parts = fanout.parts(job)
    assert {p["state"] for p in parts} == {"cancelled"}
    assert sum(p["started"] for p in parts) == 2  # the queued ones never started
    notes = fanout.notes(job)
    assert "merge" not in notes and len([k for k in notes if k.startswith("part")]) == 2
    # Each stopped at its next update: at most one step (one under way as the
    # cancel came) ended after it, however slowly the machine ran them.
    ran = [k for k in notes if k.startswith("part")]
    after = {
        k: [float(t) for t in notes.get("steps" + k.removeprefix("part"), []) if float(t) > cancelled_at]
        for k in ran
    }
    assert all(len(steps) <= 1 for steps in after.values()), (cancelled_at, after)


def test_a_part_that_fails_fails_the_job_with_its_reason_and_stops_the_others(fanout):
    alice = fanout.client()
    job = fanout.start_split("alice", parts=5, seconds=10 * STEP_SECONDS, fail=1)
    final = _follow(alice, job)[-1]
    assert final["state"] == "failed" and final["error"] == "Part 2 found a row it cannot read.", final
    states = {p["index"]: p["state"] for p in fanout.parts(job)}
    assert states[1] == "failed"
    assert "running" not in states.values() and "queued" not in states.values()
    assert "merge" not in fanout.notes(job)
    # Its slot is free again (split-sleep allows one job per user).
    again = fanout.start_split("alice", parts=1, seconds=0.1)
    assert not again.startswith("refused"), again
    assert _follow(alice, again)[-1]["state"] == "succeeded"


def test_a_memcached_restart_under_a_split_job_loses_nothing_the_rows_know(fanout):
    """memcached, store and broker, restarts while parts are done, running
    and queued: the job's record, its count of parts and the queued parts'
    tasks are gone. The running parts put the record back from the rows and
    send the queued parts again; the job ends with every part's result, and
    no part that had finished runs again."""
    alice = fanout.client()
    # Parts 3 to 6 wait on a hold, which goes with the restart: on a loaded
    # machine the start (a manage.py process) can take longer than the job
    # does, and the test then found every part past the moment it wants.
    job = fanout.start_split("alice", parts=6, seconds=6 * STEP_SECONDS, hold="alice", hold_from=2)
    assert not job.startswith("refused"), job
    alice.wait_until(
        job,
        lambda p: p["parts"]["done"] == 2 and p["parts"]["running"] == 2 and p["parts"]["queued"] == 2,
        what="parts done, running and queued",
    )
    done_before = {p["index"] for p in fanout.parts(job) if p["state"] == "succeeded"}
    fanout.memcached.stop(signal.SIGKILL)
    fanout.memcached, _ = processes.memcached(
        fanout.dir, port=int(fanout.memcached_address.rsplit(":", 1)[1])
    )
    fanout.others.append(fanout.memcached)
    final = _follow(alice, job)[-1]
    assert final["state"] == "succeeded" and final["message"] == "6 parts, sum 15", final
    parts = fanout.parts(job)
    assert {p["state"] for p in parts} == {"succeeded"}
    # Every part ran once (the worker that ran each lived): none lost, none repeated.
    assert [p["attempt"] for p in parts] == [1] * 6
    notes = fanout.notes(job)  # what was noted after the restart
    assert not done_before & {int(k[4:]) for k in notes if k.startswith("part")}
    assert len(notes["merge"]) == 1


def test_limits_count_a_split_job_once(fanout):
    bob = fanout.client("bob")
    # Held until the second start is answered: on a loaded machine that start
    # (a manage.py process) took 29 s, and the job had ended after 11.
    job = fanout.start_split("bob", parts=4, seconds=10 * STEP_SECONDS, hold="bob")
    # split-sleep allows one job per user: four parts did not take four slots.
    assert fanout.start_split("bob", parts=1, seconds=0.1).startswith("refused: You already have 1 job")
    fanout.release("bob")
    assert _follow(bob, job)[-1]["state"] == "succeeded"
    again = fanout.start_split("bob", parts=1, seconds=0.1)
    assert not again.startswith("refused"), again
    assert _follow(bob, again)[-1]["state"] == "succeeded"


@pytest.mark.browser
def test_in_a_browser_a_split_report_shows_one_bar_and_its_parts_then_downloads(fanout, tmp_path):
    """A person starts the sales report: one bar, a line saying how many
    parts run and wait and on which workers, then the file."""
    from playwright.sync_api import expect, sync_playwright

    from tests.harness.chromium import CHROMIUM, CHROMIUM_ARGS, SHOTS

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(base_url=fanout.node, accept_downloads=True).new_page()
            page.goto("/accounts/login/")
            page.get_by_label("Username").fill("alice")
            page.get_by_label("Password").fill(DEMO_PASSWORD)
            page.get_by_role("button", name="Log in").click()
            page.goto("/reports/sales-by-region/")
            page.get_by_label("Date from").fill(ALL_DATES["date_from"])
            page.get_by_label("Date to").fill(ALL_DATES["date_to"])
            page.get_by_role("button", name="Start report").click()
            parts = page.locator(".job-progress [data-field=parts]")
            expect(parts).to_contain_text(
                re.compile(r"Parts: \d of \d done, 2 running.* · on w\d@.*, w\d@"), timeout=60_000
            )
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=SHOTS / "report-in-parts-running.png", full_page=True)
            expect(page.locator(".job-progress.state-succeeded")).to_be_visible(timeout=120_000)
            expect(parts).to_have_text(re.compile(r"Ran in \d+ parts\."))
            expect(page.get_by_role("progressbar")).to_have_attribute("aria-valuenow", "100")
            page.screenshot(path=SHOTS / "report-in-parts-done.png", full_page=True)
            with page.expect_download() as download_info:
                page.locator(".job-progress [data-field=download]").click()
            path = tmp_path / "sales.csv"
            download_info.value.save_as(path)
        finally:
            browser.close()
    rows = list(csv.reader(io.StringIO(path.read_text())))
    assert rows[0][:3] == ["region", "month", "orders"] and len(rows) > 10
