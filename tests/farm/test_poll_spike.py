"""A voting spike on a real farm: two gunicorn nodes, a Celery worker with
beat flushing every half second, PostgreSQL, memcached with the vote queue
mirrored on a second server. After the spike the database holds exactly the
votes that were answered 200, even when memcached was stopped halfway."""

import collections
import concurrent.futures
import os
import random
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
import requests
from pymemcache.client.base import Client

from demofarm.polls.services import FLUSH_LOCK
from tests.harness import processes
from tests.harness.web import create_poll, flush_votes, vote_anonymously

pytestmark = pytest.mark.farm

VOTERS = 600
CHOICES = ["Yes", "No", "Unsure"]
THREADS = 24


@dataclass
class SpikeFarm:
    dir: Path
    env: dict
    database_url: str
    nodes: list[str]
    memcached: processes.Process
    memcached_port: int
    started: list = field(default_factory=list)


@pytest.fixture(scope="module")
def spike_farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SpikeFarm]:
    base = tmp_path_factory.mktemp("spike")
    with processes.postgres_database("webfarm_spike") as database_url, processes.stopped_after() as started:
        main, main_address = processes.memcached(base)
        mirror, mirror_address = processes.memcached(base)
        broker, broker_url = processes.redis(base)
        started += [main, mirror, broker]
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "MEMCACHED_SERVERS": main_address,
            "QUEUES_MIRRORS": f"{main_address},{mirror_address}",
            "CELERY_BROKER_URL": broker_url,
            "CELERY_TASK_DEFAULT_QUEUE": "spike",
            "MEMCACHED_NAMESPACE": "spike",
            "DJANGO_SECRET_KEY": "spike-" + uuid.uuid4().hex,
            "POLLS_FLUSH_EVERY": "0.5",
            # Every voter here comes from 127.0.0.1.
            "POLLS_ANONYMOUS_PER_ADDRESS": "100000",
        }
        processes.manage(env, "migrate", "--no-input", "-v", "0")
        started.append(processes.celery_worker(env, base, "flusher"))
        started.append(processes.celery_beat(env, base))
        nodes = []
        for name in ("node-a", "node-b"):
            node, url = processes.gunicorn(env, base, name)
            started.append(node)
            nodes.append(url)
        port = int(main_address.rsplit(":", 1)[1])
        yield SpikeFarm(base, env, database_url, nodes, main, port, started)


def _db_totals(farm: SpikeFarm, poll: int) -> dict[int, int]:
    with psycopg.connect(farm.database_url) as db:
        rows = db.execute(
            "SELECT choice_id, count(*) FROM polls_vote WHERE poll_id = %s GROUP BY choice_id",
            (poll,),
        ).fetchall()
    return dict(rows)


@dataclass
class Answer:
    voter: int
    choice: int
    status: int
    via: str | None


def _vote(node: str, poll: int, choice: int, voter: int, session: requests.Session | None = None) -> Answer:
    response = vote_anonymously(node, poll, choice, session)
    via = response.json().get("via") if response.status_code == 200 else None
    return Answer(voter, choice, response.status_code, via)


def _spike(farm: SpikeFarm, poll: int, choices: list[int], on_answer=lambda done: None) -> list[Answer]:
    rng = random.Random(poll)
    plan = [(voter, rng.choice(choices)) for voter in range(VOTERS)]
    answers: list[Answer] = []
    lock = threading.Lock()

    def one(voter: int, choice: int) -> Answer:
        answer = _vote(farm.nodes[voter % 2], poll, choice, voter)
        with lock:
            answers.append(answer)
            on_answer(len(answers))
        return answer

    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(lambda args: one(*args), plan))
    return answers


def _expected(answers: list[Answer]) -> dict[int, int]:
    return dict(collections.Counter(a.choice for a in answers if a.status == 200))


def _settles_exactly(farm: SpikeFarm, poll: int, expected: dict[int, int]) -> None:
    """The beat-driven flusher brings the database to exactly the accepted
    votes; one more flush by hand then adds nothing."""
    processes.wait_for(
        lambda: _db_totals(farm, poll) == expected,
        timeout=90,
        interval=0.5,
        what=f"database totals {expected} (now {_db_totals(farm, poll)})",
    )
    processes.wait_for(
        lambda: flush_votes(farm.env), timeout=30, interval=0.5, what="a flush by hand (the lock is free)"
    )
    assert _db_totals(farm, poll) == expected


def _live_results(farm: SpikeFarm, poll: int, expected: dict[int, int]) -> None:
    """Both nodes serve the running totals from memcached, equal to the database's."""
    for node in farm.nodes:
        processes.wait_for(
            lambda node=node: _shown(node, poll) == (True, expected),
            timeout=30,
            interval=0.5,
            what=f"live totals {expected} on {node} (now {_shown(node, poll)})",
        )


def _shown(node: str, poll: int) -> tuple[bool, dict[int, int]]:
    results = requests.get(f"{node}/polls/{poll}/results.json", timeout=10).json()
    return results["live"], {c["id"]: c["votes"] for c in results["choices"] if c["votes"]}


def test_a_spike_through_two_nodes_lands_in_the_database_exactly(spike_farm):
    poll, choices = create_poll(spike_farm.env, "Spike without failures?", CHOICES)
    answers = _spike(spike_farm, poll, choices)
    assert collections.Counter(a.status for a in answers) == {200: VOTERS}
    assert {a.via for a in answers} == {"queue"}  # the request path stayed in memcached

    # Some voters try again, at once and on both nodes: none gets a second vote.
    again = [requests.Session() for _ in range(20)]
    firsts = [_vote(spike_farm.nodes[0], poll, choices[0], -1 - n, s) for n, s in enumerate(again)]
    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        repeats = list(
            pool.map(
                lambda args: _vote(spike_farm.nodes[args[0] % 2], poll, choices[1], -1, args[1]),
                [(n, s) for n, s in enumerate(again * 3)],
            )
        )
    assert {a.status for a in firsts} == {200}
    assert {a.status for a in repeats} == {409}

    expected = _expected(answers + firsts)
    assert sum(expected.values()) == VOTERS + len(again)
    _settles_exactly(spike_farm, poll, expected)
    _live_results(spike_farm, poll, expected)


def test_a_spike_with_memcached_stopped_halfway_is_still_exact(spike_farm):
    poll, choices = create_poll(spike_farm.env, "Spike through a memcached restart?", CHOICES)
    farm = spike_farm
    stopped, restarted = threading.Event(), threading.Event()
    # Hold the flusher's lock, so every vote accepted before the stop is still
    # only in memcached when it stops; the restart drops the lock.
    main = Client(("127.0.0.1", farm.memcached_port), key_prefix=b"spike:", default_noreply=False)
    try:
        # The beat's flusher takes it every 0.5 s for a moment: wait for a gap.
        processes.wait_for(
            lambda: main.add(FLUSH_LOCK, b"held by the test", expire=600),
            timeout=30,
            what="the flusher's lock",
        )
    finally:
        main.close()
    unflushed = []

    def stop_and_start(done: int) -> None:
        # Runs in the voting threads: the votes in flight meet the stop.
        if done == VOTERS // 2 and not stopped.is_set():
            stopped.set()
            unflushed.append(_db_totals(farm, poll))
            farm.memcached.stop()  # its memory with it: markers, totals, the queue's main copy
        elif done == 3 * VOTERS // 4 and not restarted.is_set():
            restarted.set()
            farm.memcached, _ = processes.memcached(farm.dir, port=farm.memcached_port)
            farm.started.append(farm.memcached)

    answers = _spike(farm, poll, choices, on_answer=stop_and_start)
    assert stopped.is_set() and restarted.is_set()
    assert unflushed == [{}]  # nothing was in the database yet: the queue held every vote
    statuses = collections.Counter(a.status for a in answers)
    assert statuses == {200: VOTERS}, statuses  # not lost, not refused
    vias = collections.Counter(a.via for a in answers)
    assert vias["direct"] > 0 and vias["queue"] > VOTERS // 2, vias

    _settles_exactly(farm, poll, _expected(answers))
    _live_results(farm, poll, _expected(answers))
