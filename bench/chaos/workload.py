"""Users and voters against the farm, every request written into the history."""

import http.client
import random
import threading
import time
from dataclasses import dataclass, field

import requests

from bench.chaos.farm import NODES, Farm
from tests.harness.web import DEMO_PASSWORD

VOTER_COOKIE = "poll_voter"  # demofarm/polls/views.py

# (kind, params): a few of each, so the checker computes each once on a quiet farm.
REPORTS = [
    ("sales-by-region", {"date_from": "2024-01-01", "date_to": "2025-12-31"}),  # split in parts
    ("sales-by-region", {"date_from": "2024-07-01", "date_to": "2024-12-31"}),
    ("top-customers", {"date_from": "2024-01-01", "date_to": "2025-12-31", "top": "20"}),
    ("return-rates", {"date_from": "2024-01-01", "date_to": "2025-12-31", "min_units": "10"}),
]
USERS = ("alice", "bob", "carol", "dave")
# A user's start is a customer import this often: a CSV of IMPORT_ROWS rows,
# every REJECT_EVERY-th one rejected (a region no one has).
IMPORT_SHARE = 0.15
IMPORT_ROWS = 6000
REJECT_EVERY = 10
IMPORT_KIND = "customer-import"
CANCEL_SHARE = 0.2
POLL_EVERY = 0.3
# A request that waits longer than this is the farm's failure, unless its node
# was stalled meanwhile (a stopped process answers nothing).
REQUEST_TIMEOUT = 20.0
# How long one job is followed before the user moves on (the checker waits for it).
FOLLOW_AT_MOST = 120.0
VOTES_PER_SECOND = 4


@dataclass
class Call:
    user: str
    node: str
    what: str  # start, poll, cancel, vote, login
    began: float  # monotonic
    took: float
    status: int | None  # None: no answer (connection refused or reset, timed out)
    retry_after: bool = False
    error: str = ""


@dataclass
class History:
    calls: list[Call] = field(default_factory=list)
    accepted: dict[str, tuple[str, str, dict]] = field(default_factory=dict)  # job: (user, kind, params)
    cancel_asked: dict[str, float] = field(default_factory=dict)  # job: when (monotonic)
    # job: when a node answered that it took the cancel (wall clock, as the database's times)
    cancel_taken: dict[str, float] = field(default_factory=dict)
    votes_accepted: list[float] = field(default_factory=list)  # when (monotonic)
    # The anonymous voter of each accepted vote, as the database stores it, and how the node took it.
    voters: dict[str, tuple[str, float]] = field(default_factory=dict)  # voter: (via, when)
    votes_unanswered: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, call: Call) -> None:
        with self.lock:
            self.calls.append(call)


class Browser:
    """One user's cookies, used on whichever node answers."""

    def __init__(self, farm: Farm, user: str, history: History, rng: random.Random) -> None:
        self.farm, self.user, self.history, self.rng = farm, user, history, rng
        self.session = requests.Session()

    def call(self, what: str, method: str, path: str, **kwargs: object) -> requests.Response | None:
        """The request on one node, then the other if the first gives no answer."""
        nodes = list(NODES)
        self.rng.shuffle(nodes)
        for node in nodes:
            response = self.once(node, what, method, path, **kwargs)
            if response is not None:
                return response
        return None

    def once(
        self, node: str, what: str, method: str, path: str, **kwargs: object
    ) -> requests.Response | None:
        headers = {"Accept": "application/json", **kwargs.pop("headers", {})}  # type: ignore[dict-item]
        if method == "POST":
            headers["X-CSRFToken"] = self.session.cookies.get("csrftoken", "")
            headers["Referer"] = self.farm.url(node) + "/"
        began = time.monotonic()
        try:
            try:
                response = self.session.request(
                    method, self.farm.url(node) + path, headers=headers, timeout=REQUEST_TIMEOUT, **kwargs
                )
            except requests.ConnectionError as exc:
                if not _closed_unused(exc):
                    raise
                # The server closed the kept-alive connection as the request
                # went out (gunicorn's keep-alive ends): a browser sends it
                # again on a new connection, and so does this one, once.
                response = self.session.request(
                    method, self.farm.url(node) + path, headers=headers, timeout=REQUEST_TIMEOUT, **kwargs
                )
        except requests.RequestException as exc:
            self.history.add(
                Call(self.user, node, what, began, time.monotonic() - began, None, error=repr(exc))
            )
            return None
        self._one_site()
        self.history.add(
            Call(
                self.user,
                node,
                what,
                began,
                time.monotonic() - began,
                response.status_code,
                retry_after="Retry-After" in response.headers,
                error=response.text[:200] if response.status_code >= 400 else "",
            )
        )
        return response

    def _one_site(self) -> None:
        """The nodes are one site (behind a balancer's one name in a real
        farm): a cookie a node sets is sent to every node. On hosts each node
        has an address of its own, and the jar would keep one per address."""
        jar = self.session.cookies
        for cookie in list(jar):
            if cookie.domain:
                jar.clear(cookie.domain, cookie.path, cookie.name)
                jar.set(cookie.name, cookie.value, path=cookie.path)

    def login(self, until: float) -> bool:
        while time.monotonic() < until:
            page = self.call("login", "GET", "/accounts/login/")
            if page is not None and page.status_code == 200:
                form = {"username": self.user, "password": DEMO_PASSWORD, "next": "/"}
                form["csrfmiddlewaretoken"] = self.session.cookies.get("csrftoken", "")
                done = self.call("login", "POST", "/accounts/login/", data=form, allow_redirects=False)
                if done is not None and done.status_code == 302:
                    return True
            time.sleep(0.5)
        return False


def user_loop(farm: Farm, user: str, history: History, seed: int, until: float) -> None:
    rng = random.Random(f"{seed}:{user}")
    browser = Browser(farm, user, history, rng)
    if not browser.login(until):
        return
    uploads = 0
    while time.monotonic() < until:
        # Each user's first start is an import, so even a short run on a slow
        # machine has one to check; then one start in IMPORT_SHARE.
        if uploads == 0 or rng.random() < IMPORT_SHARE:
            uploads += 1
            tag = f"chaos{seed}-{user}-{uploads}"
            kind, params = IMPORT_KIND, {"name": f"{tag}.csv"}
            files = {"file": (f"{tag}.csv", customers_csv(tag), "text/csv")}
            response = browser.call("start", "POST", "/imports/", files=files)
        else:
            kind, params = rng.choice(REPORTS)
            response = browser.call("start", "POST", f"/reports/{kind}/", data=params)
        if response is None or response.status_code != 202:
            time.sleep(1.0)  # refused (limits, memcached away) or no node answered: later
            continue
        job = response.json()["job"]
        with history.lock:
            history.accepted[job] = (user, kind, params)
        cancel_at = time.monotonic() + rng.uniform(0.5, 6.0) if rng.random() < CANCEL_SHARE else None
        followed_until = time.monotonic() + FOLLOW_AT_MOST
        while time.monotonic() < min(until, followed_until):
            if cancel_at is not None and time.monotonic() >= cancel_at:
                with history.lock:
                    history.cancel_asked[job] = time.monotonic()
                answer = browser.call("cancel", "POST", f"/progress/{job}/cancel/")
                if answer is not None and answer.status_code in (200, 202):
                    with history.lock:
                        history.cancel_taken[job] = time.time()
                cancel_at = None
            polled = browser.call("poll", "GET", f"/progress/{job}/")
            if polled is not None and polled.status_code == 200 and polled.json().get("final"):
                break
            time.sleep(POLL_EVERY)


def customers_csv(tag: str) -> bytes:
    """IMPORT_ROWS customers whose e-mail addresses start with the tag (the
    checker counts them), every REJECT_EVERY-th row in no region."""
    lines = ["name,email,region,joined_on"]
    for i in range(IMPORT_ROWS):
        region = "Atlantis" if i % REJECT_EVERY == 0 else "North"
        lines.append(f"Customer {i},{tag}-{i}@example.com,{region},2024-03-01")
    return ("\n".join(lines) + "\n").encode()


def imported_rows() -> int:
    """The rows of customers_csv() an import keeps."""
    return IMPORT_ROWS - len(range(0, IMPORT_ROWS, REJECT_EVERY))


def voter_loop(farm: Farm, poll: int, choices: list[int], history: History, seed: int, until: float) -> None:
    """Anonymous voters, a new one a vote, on alternating nodes."""
    rng = random.Random(f"{seed}:votes")
    while time.monotonic() < until:
        browser = Browser(farm, "voter", history, rng)
        node = rng.choice(NODES)
        page = browser.once(node, "vote", "GET", f"/polls/{poll}/")
        if page is not None and page.status_code == 200:
            # Not sent again elsewhere when unanswered: it may have been
            # stored, and the checker allows for each such vote once.
            voted = browser.once(
                node, "vote", "POST", f"/polls/{poll}/vote/", data={"choice": rng.choice(choices)}
            )
            with history.lock:
                if voted is None:
                    history.votes_unanswered += 1
                elif voted.status_code in (200, 202):
                    history.votes_accepted.append(time.monotonic())
                    history.voters[_voter_of(browser)] = (_via(voted), time.monotonic())
        time.sleep(1 / VOTES_PER_SECOND)


def _voter_of(browser: Browser) -> str:
    """The voter the node made of this browser (its signed cookie's value)."""
    signed = browser.session.cookies.get(VOTER_COOKIE, "")
    return "a:" + signed.split(":", 1)[0]


def _via(response: requests.Response) -> str:
    try:
        return str(response.json().get("via"))
    except ValueError:
        return "?"


def _closed_unused(exc: BaseException) -> bool:
    """Whether the connection was closed or reset with no byte of an answer:
    what an idle kept-alive connection's end looks like to the request sent
    on it (Chromium sends such a request again, on a reused connection)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, http.client.RemoteDisconnected | ConnectionResetError):
            return True
        seen = (
            seen.__cause__
            or seen.__context__
            or (seen.args[1] if len(seen.args) > 1 and isinstance(seen.args[1], BaseException) else None)
        )
    return False
