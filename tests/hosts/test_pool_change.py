"""The memcached pool of a running hosts farm grown from two servers to three
and shrunk back to two with the operators' command (`manage.py
memcached_pool`, docs/farm.md), nginx's fast path switched at the NEW stage,
while users start reports split in parts, follow them through nginx and
through Django, cancel some, vote, and the broker and the HTTP queue carry
messages. Then the invariants of a quiet farm are checked.

    client ── balancer (nginx) ── web1, web2;  mc1, mc2 (and mc3 for a while)
                                   worker1, worker2;  db
"""

import random
import re
import shlex
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial

import pytest
import requests
from pymemcache.client.base import Client as PlainClient
from pymemcache.exceptions import MemcacheError

from tests.harness import hosts, keyspace, processes
from tests.harness.hostfarm import HOSTS, MEMCACHED_PORT, HostFarm, host_farm, render_balancer
from tests.harness.web import WebClient, create_poll, flush_votes, new_user, vote_anonymously

pytestmark = pytest.mark.farm

LAN = {**HOSTS, "mc3": 23}
USERS = ("alice", "bob", "carol")
SPLIT = {"date_from": "2024-01-01", "date_to": "2025-12-31"}  # sales-by-region, in parts of PART_ROWS
PART_ROWS = 4000
CANCEL_SHARE = 0.25
QUEUE = "poolchange"
JSON = {"Accept": "application/json"}
# No poll may wait longer: nginx's fast path timeout, then Django's memcached
# timeout once (tests/hosts/test_hosts.py), and a loaded machine's margin.
LONGEST_WAIT = 3.0
NAMESPACE = "webfarm"
RAN = re.compile(r"Task (\S+)\[([0-9a-f-]+)\] succeeded")


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostFarm]:
    extra = {
        "DEMO_ORDERS": "20000",
        "REPORTS_CHUNK_ROWS": "200",
        "REPORTS_PART_ROWS": str(PART_ROWS),
        # A job is lost after 3 silent beats (3 s), and only if its process is gone
        # (webfarm.progress.liveness): a loaded machine or a stage switch that holds
        # a worker's heartbeat thread takes no live job for lost.
        "PROGRESS_HEARTBEAT_INTERVAL": "1",
        "REAP_EVERY": "2",
        "REPORTS_PER_USER": "10",
        "REPORTS_PER_KIND": "50",
        "POLLS_FLUSH_EVERY": "1",
        "POLLS_ANONYMOUS_PER_ADDRESS": "10000000",  # every voter comes from the client host
        # Short stages: a change takes seconds, not a minute.
        "MEMCACHED_POOL_STALE": "2",
        "MEMCACHED_POOL_REFRESH": "0.5",
    }
    with hosts.lan(LAN) as lan, host_farm(lan, tmp_path_factory.mktemp("pool"), extra=extra) as farm:
        yield farm


@dataclass
class Seen:
    """One answer to a poll of a job, in the order its user saw them."""

    job: str
    via: str  # "nginx" (the public URL through the balancer) or "django" (a web node)
    status: int  # 0: no answer
    took: float
    retry_after: bool
    body: dict
    source: str = ""  # nginx's X-Progress-Source: "memcached" when its fast path answered
    at: float = 0.0  # when it was asked (Unix time), to set beside the farm's logs
    node: str = ""  # the web node asked (via django)
    error: str = ""  # why there was no answer


@dataclass
class Workload:
    seen: list[Seen] = field(default_factory=list)
    owner: dict[str, str] = field(default_factory=dict)  # job: user
    cancelled: set[str] = field(default_factory=set)
    answers: Counter = field(default_factory=Counter)  # (what, status, Retry-After)
    votes: int = 0
    put: set[str] = field(default_factory=set)
    got: Counter = field(default_factory=Counter)
    resent: int = 0  # requests sent again after nginx closed their kept-alive connection
    # Each job's record as every memcached server held it, sampled while the pool
    # changes: (time, server, what it held), for a failure to show where a value lived.
    held: dict[str, list[tuple[float, str, str]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answered(self, what: str, response: requests.Response) -> None:
        with self.lock:
            self.answers[(what, response.status_code, "Retry-After" in response.headers)] += 1


def _as_a_browser(send: Callable[[], requests.Response], work: Workload) -> requests.Response:
    """Send a request again, once, when the kept-alive connection it went on
    was closed under it before any answer, as a browser does: nginx closes
    its idle connections when it reloads (the NEW stage's --at-new), and one
    that was sent on meanwhile was never read."""
    try:
        return send()
    except requests.ConnectionError as exc:
        if "Connection aborted" not in str(exc):
            raise
        with work.lock:
            work.resent += 1
        return send()


def _user(farm: HostFarm, name: str, work: Workload, stop: threading.Event) -> None:
    """Start a report, follow it to its end by turns through nginx and each
    web node, cancel one in CANCEL_SHARE once it moves; again until stopped."""
    rng = random.Random(name)
    with farm.lan.inside("client"):
        client = WebClient(farm.url).login(name)
        while not stop.is_set():
            start = partial(client.post, "/reports/sales-by-region/", SPLIT, headers=JSON)
            answer = _as_a_browser(start, work)
            work.answered("start", answer)
            if answer.status_code != 202:
                stop.wait(1.0)
                continue
            started = answer.json()
            job = started["job"]
            with work.lock:
                work.owner[job] = name
            cancel = rng.random() < CANCEL_SHARE
            for turn in range(3000):
                via = ("nginx", "django")[turn % 2]
                node = farm.node(("web1", "web2")[turn // 2 % 2]) if via == "django" else None
                path = started["public_progress_url"] if via == "nginx" else f"/progress/{job}/"
                asked, at = time.time(), time.monotonic()
                error = ""
                try:
                    # A node's own address: the session's cookies, which the balancer's
                    # host set, go along.
                    ask = partial(
                        client.get, path, node=node, cookies=client.session.cookies.get_dict(), timeout=30
                    )
                    got = _as_a_browser(ask, work)
                except requests.RequestException as exc:
                    got, error = None, repr(exc)
                took = time.monotonic() - at
                body = got.json() if got is not None and got.status_code == 200 else {}
                if got is not None:
                    work.answered("poll", got)
                with work.lock:
                    work.seen.append(
                        Seen(
                            job,
                            via,
                            got.status_code if got else 0,
                            took,
                            bool(got and "Retry-After" in got.headers),
                            body,
                            got.headers.get("X-Progress-Source", "") if got else "",
                            asked,
                            node or "",
                            error,
                        )
                    )
                if body.get("final"):
                    break
                if cancel and body.get("percent", 0) > 0:
                    taken = _as_a_browser(partial(client.post, f"/progress/{job}/cancel/"), work)
                    work.answered("cancel", taken)
                    if taken.status_code in (200, 202):
                        with work.lock:
                            work.cancelled.add(job)
                    cancel = False
                time.sleep(0.15)


def _when(at: float) -> str:
    """A Unix time as the farm's logs write it (to the millisecond)."""
    return time.strftime("%H:%M:%S", time.localtime(at)) + f".{int(at * 1000) % 1000:03d}"


def _answers(job: str, seen: list[Seen]) -> str:
    """A job's polls as its user saw them, to set beside the farm's logs."""
    lines = [f"job {job}: its bar went back; each answer, in order:"]
    for s in seen:
        b = s.body
        lines.append(
            f"  {_when(s.at)} {s.via:6} {s.node or s.source or '-':28} {s.status} took {s.took:.2f}s "
            f"{b.get('state')} {b.get('percent')}% parts={b.get('parts')} updated={b.get('updated_at')} "
            f"beat={b.get('heartbeat_at')} {b.get('message', '')!r}"
        )
    return "\n".join(lines)


def _servers(work: Workload, job: str) -> str:
    lines = [f"  {_when(at)} {host}: {held}" for at, host, held in work.held.get(job, [])]
    return "\nwhat each memcached server held of its record, as it changed:\n" + "\n".join(lines)


def _logged(farm: HostFarm, job: str) -> str:
    """What the farm's processes logged of a job, and of the pool change."""
    lines = [
        f"{name}: {line}"
        for name, process in farm.started.items()
        for line in process.log().splitlines()
        if job in line or "memcached pool" in line or " lost" in line
    ]
    return "\nthe farm's log lines of it:\n" + "\n".join(lines[-300:])


def _voter(farm: HostFarm, poll: int, choices: list[int], work: Workload, stop: threading.Event) -> None:
    with farm.lan.inside("client"):
        while not stop.is_set():
            answer = _as_a_browser(partial(vote_anonymously, farm.url, poll, random.choice(choices)), work)
            work.answered("vote", answer)
            if answer.status_code == 200:
                with work.lock:
                    work.votes += 1
            stop.wait(0.2)


def _queue(farm: HostFarm, work: Workload, stop: threading.Event) -> None:
    """A producer and a consumer of the HTTP queue, by turns."""
    bearer = {"Authorization": f"Bearer {farm.env['QUEUE_API_TOKEN']}"}
    url = f"{farm.url}/queues/{QUEUE}/"
    n = 0
    with farm.lan.inside("client"):
        while not stop.is_set():
            n += 1
            answer = requests.post(url, data=f"message {n}".encode(), headers=bearer, timeout=30)
            work.answered("put", answer)
            if answer.ok:
                with work.lock:
                    work.put.add(f"message {n}")
            if n % 2 == 0:
                _take(url, bearer, work)
            stop.wait(0.1)
        # Then what is left, until the queue says it has none.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (work.put - set(work.got)):
            if not _take(url, bearer, work):
                time.sleep(0.5)


def _take(url: str, bearer: dict, work: Workload) -> bool:
    got = requests.get(url, headers=bearer, timeout=30)
    work.answered("take", got)
    if got.status_code != 200:
        return False
    acked = requests.post(
        url + "ack/", headers={**bearer, "Queue-Receipt": got.headers["Queue-Receipt"]}, timeout=30
    )
    work.answered("ack", acked)
    with work.lock:
        work.got[got.content.decode()] += 1
    return True


def _counters(farm: HostFarm) -> dict[str, int]:
    with farm.lan.inside("client"):
        answer = requests.get(
            f"{farm.url}/stats/counters.json",
            headers={"Authorization": f"Bearer {farm.env['STATS_API_TOKEN']}"},
            timeout=30,
        )
    answer.raise_for_status()
    return answer.json()["counters"]


def _total(counters: dict[str, int], name: str, **labels: str) -> int:
    def matches(key: str) -> bool:
        parts = key.split("|")
        return parts[0] == name and all(f"{k}={v}" in parts[1:] for k, v in labels.items())

    return sum(value for key, value in counters.items() if matches(key))


STAMPS = re.compile(rb'"percent":([0-9.]+|null).*"updated_at":([0-9.]+)')


def _held(raw: bytes | None) -> str:
    """What a server holds of a record, in a few characters: a miss, a
    value (its percent and updated_at), or a tombstone and what it carries."""
    if raw is None:
        return "-"
    kind = "tombstone of " if raw.startswith(b"\x00webfarm-moved:") else ""
    found = STAMPS.search(raw)
    return f"{kind}{found.group(1).decode()}% updated {_when(float(found.group(2)))}" if found else kind + "?"


def _sampler(farm: HostFarm, work: Workload, stop: threading.Event) -> None:
    """Read each job's record on every memcached server, raw, every 50 ms."""
    servers = {h: f"{farm.address(h)}:{MEMCACHED_PORT}" for h in ("mc1", "mc2", "mc3")}
    with farm.lan.inside("client"):
        clients = {h: PlainClient(a, connect_timeout=1, timeout=1) for h, a in servers.items()}
        try:
            _sample(clients, work, stop)
        finally:
            for client in clients.values():
                client.close()


def _sample(clients: dict[str, PlainClient], work: Workload, stop: threading.Event) -> None:
    last: dict[tuple[str, str], str] = {}
    while not stop.wait(0.05):
        with work.lock:
            jobs = list(work.owner)
        keys = [f"{NAMESPACE}:job:{job}" for job in jobs]
        for host, client in clients.items():
            try:
                found = client.get_many(keys) if keys else {}
            except (MemcacheError, OSError):  # mc3 before it starts, after it stops
                continue
            for job, key in zip(jobs, keys, strict=True):
                held = _held(found.get(key))
                if last.get((job, host)) != held:
                    last[(job, host)] = held
                    with work.lock:
                        work.held.setdefault(job, []).append((time.time(), host, held))


def _change_pool(farm: HostFarm, to: tuple[str, ...]) -> str:
    """The operators' command, on web1; at NEW, nginx reloaded with a
    configuration rendered from the new list (as docs/farm.md says)."""
    staged = render_balancer(farm, to, run_dir=farm.dir / f"nginx-{len(to)}").parent
    live = farm.dir / "nginx"
    switch = "sh -c " + shlex.quote(
        f"cp {staged}/webfarm.conf {live}/webfarm.conf && nginx -p {live} -c {live}/nginx.conf -s reload"
    )
    servers = ",".join(f"{farm.address(h)}:{MEMCACHED_PORT}" for h in to)
    argv = [str(processes.BIN / "python"), "manage.py", "memcached_pool", "--to", servers, "--at-new", switch]
    return farm.lan.run("web1", [*argv, "--wait", "120"], env=farm.env, timeout=300)


def _took(said: str) -> float:
    """Seconds from the command's first line to its last (each starts with the time)."""
    stamps = [line.split()[0] for line in said.splitlines() if re.match(r"\d\d:\d\d:\d\d\.\d+ ", line)]
    seconds = [
        sum(float(part) * 60**n for n, part in enumerate(reversed(stamp.split(":")))) for stamp in stamps
    ]
    return seconds[-1] - seconds[0]


def _runs(farm: HostFarm) -> Counter:
    """How many times each Celery task id succeeded, on every worker."""
    return Counter(match.group(2) for match in RAN.finditer(farm.logs("worker1", "worker2", "web2")))


def test_the_pool_grows_and_shrinks_under_a_running_farm(farm):
    with farm.lan.inside("client"):
        poll, choices = create_poll(farm.env, "Which server?", ["mc1", "mc2", "mc3"])
        for name in USERS:
            new_user(farm.env, farm.url, name)
        quiet = new_user(farm.env, farm.url, "dave")
        job = quiet.start_report("sales-by-region", SPLIT)["job"]
        final = quiet.wait_until(job, lambda p: p["final"], timeout=180)
        assert final["state"] == "succeeded"
        expected = quiet.get(final["result_url"]).content
    # The baseline once dave's start is counted (a process sends its counts within a second).
    before = processes.wait_for(
        lambda: (lambda c: c if _total(c, "jobs", state="queued") else None)(_counters(farm)),
        timeout=30,
        what="the quiet report counted",
    )

    work, stop = Workload(), threading.Event()
    loops = [threading.Thread(target=_user, args=(farm, name, work, stop), daemon=True) for name in USERS]
    loops.append(threading.Thread(target=_voter, args=(farm, poll, choices, work, stop), daemon=True))
    loops.append(threading.Thread(target=_queue, args=(farm, work, stop), daemon=True))
    loops.append(threading.Thread(target=_sampler, args=(farm, work, stop), daemon=True))
    for loop in loops:
        loop.start()
    try:
        processes.wait_for(lambda: len(work.owner) >= len(USERS), timeout=60, what="a report of each user")
        grew = _change_pool(farm, ("mc1", "mc2", "mc3"))
        processes.wait_for(
            lambda: len(work.owner) >= 2 * len(USERS), timeout=120, what="reports on three servers"
        )
        shrank = _change_pool(farm, ("mc1", "mc2"))
        started = len(work.owner)
        processes.wait_for(lambda: len(work.owner) > started, timeout=120, what="a report after the change")
    finally:
        # Also when a step failed: the users stop before their farm does, not
        # in the tests that run next on this worker.
        stop.set()
        for loop in loops:
            loop.join(timeout=300)
    assert not [loop for loop in loops if loop.is_alive()], loops
    assert all("running sh -c" in said and "done: the farm uses" in said for said in (grew, shrank)), (
        grew,
        shrank,
    )
    assert "it can be stopped" in shrank, shrank

    for said in (grew, shrank):
        assert int(re.search(r"walk 1: (\d+) values moved", said).group(1)) > 0, said
    print(
        f"\ngrew in {_took(grew):.1f} s, shrank in {_took(shrank):.1f} s; {len(work.owner)} reports, "
        f"{len(work.cancelled)} cancelled, {len(work.seen)} polls "
        f"({sum(s.source == 'memcached' for s in work.seen)} from nginx's fast path), {work.votes} votes, "
        f"{len(work.put)} queue messages, {work.resent} sent again on a closed connection; "
        f"answers: {dict(work.answers)}"
    )
    assert any(s.source == "memcached" for s in work.seen)

    # The removed server holds nothing of the farm's.
    with farm.lan.inside("client"):
        assert keyspace.items(f"{farm.address('mc3')}:{MEMCACHED_PORT}", f"{NAMESPACE}:") == []

    # Every accepted job ended as on a quiet farm: its result, or cancelled when asked.
    assert len(work.owner) >= 3 * len(USERS)
    by_job: dict[str, list[Seen]] = {}
    for seen in work.seen:
        by_job.setdefault(seen.job, []).append(seen)
    with farm.lan.inside("client"):
        clients = {name: WebClient(farm.url).login(name) for name in USERS}
        for job, name in work.owner.items():
            final = clients[name].wait_until(job, lambda p: p["final"], timeout=240)
            if final["state"] == "cancelled":
                assert job in work.cancelled, final
                continue
            assert final["state"] == "succeeded", final
            assert clients[name].get(final["result_url"]).content == expected, job

    # Its bar never went back, through either path, and no answer was another job's.
    for job, seen in by_job.items():
        for via in ("nginx", "django"):
            bodies = [s.body for s in seen if s.via == via and s.body]
            assert all(body["job"] == job for body in bodies), job
            percents = [body["percent"] for body in bodies]
            assert percents == sorted(percents), (
                _answers(job, seen) + _logged(farm, job) + _servers(work, job)
            )
            ends = [n for n, body in enumerate(bodies) if body["final"]]
            assert not ends or ends[0] == len(bodies) - 1, (job, via)

    # No 5xx but 503 with Retry-After; no poll waited past the bound.
    assert all(status < 500 or (status == 503 and retry) for _, status, retry in work.answers), work.answers
    slow = sorted(s.took for s in work.seen if s.took > LONGEST_WAIT)
    assert not slow, slow
    unanswered = [s for s in work.seen if not s.status]
    assert not unanswered, "\n".join(
        f"no answer at {_when(s.at)} via {s.via} {s.node or ''} after {s.took:.2f}s: {s.error}"
        for s in unanswered
    )

    # Every message the HTTP queue accepted was delivered; Celery ran each task once.
    assert work.put and work.put <= set(work.got), sorted(work.put - set(work.got))[:10]
    twice = [task for task, runs in _runs(farm).items() if runs > 1]
    assert not twice, twice

    # Votes stored equal votes accepted; counters' totals equal the events
    # counted (a process sends what it counts within a second).
    with farm.lan.inside("client"):
        processes.wait_for(lambda: _votes(farm, poll) == work.votes, timeout=30, what="the votes stored")
    assert work.votes > 0
    accepted = len(work.owner)

    def counted() -> tuple[int, int, int]:
        after = _counters(farm)
        return tuple(
            _total(after, name, **labels) - _total(before, name, **labels) for name, labels in COUNTED
        )

    settled = processes.wait_for(
        lambda: (lambda c: c if c == (accepted, work.votes, 2 * len(USERS)) else None)(counted()),
        timeout=30,
        what="the counters' totals",
    )
    assert settled


# The counters checked, and the events they count: reports started, votes, logins.
COUNTED = (("jobs", {"state": "queued"}), ("poll_votes", {}), ("logins", {}))


def _votes(farm: HostFarm, poll: int) -> int:
    flush_votes(farm.env)
    code = f"from demofarm.polls.models import Vote; print(Vote.objects.filter(poll={poll}).count())"
    return int(processes.manage(farm.env, "shell", "-c", code).strip().splitlines()[-1])
