"""Attacks on a real farm: a web node of two gunicorn processes, a Celery
worker and a small memcached run with -M that is store and broker at once.

Each test is an attack as an audit from outside ran it: an old copy kept and
written back after the change that superseded it (a demoted staff user, a
session after logout), a flood of puts through the HTTP front, look-alike
usernames and throttled logins at the login page, a refused user agent at
the poll gate, bodies Django cannot parse, and the logs a token URL leaves.
The node runs the site's settings with a password hasher that counts and a
refused user agent (tests/harness/audit_settings.py).
"""

import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from tests.harness import keyspace, processes
from tests.harness.hashers import hashes_counted
from tests.harness.processes import wait_for
from tests.harness.web import DEMO_PASSWORD, WebClient

pytestmark = pytest.mark.farm

NAMESPACE = "attacks"
TOKEN = "attacks-api-token"
ALL_DATES = {"date_from": "2024-01-01", "date_to": "2025-12-31", "top": "5", "region": ""}


# Failures of one username before its logins are refused (the default is 10).
LOGIN_FAILURES = 4


@dataclass
class Farm:
    env: dict
    base: str
    address: str
    dir: Path
    memcached: processes.Process
    web: processes.Process
    started: list[processes.Process]

    @property
    def hashes(self) -> int:
        """Password hashes the web node has made so far."""
        return hashes_counted(self.env["HASH_COUNT_FILE"])


@pytest.fixture(scope="module")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    tmp_path: Path = tmp_path_factory.mktemp("attacks")
    with processes.stopped_after() as started:
        mc, address = processes.memcached(tmp_path, memory_mb=8, extra=["-M"])
        started.append(mc)
        env = processes.one_memcached_env(
            tmp_path,
            address,
            NAMESPACE,
            DEMO_ORDERS=2000,
            QUEUE_API_TOKEN=TOKEN,
            QUEUES_HTTP_MAX_BYTES=1024 * 1024,
            QUEUES_HTTP_MAX_TOTAL_BYTES=2 * 1024 * 1024,
            DJANGO_SETTINGS_MODULE="tests.harness.audit_settings",
            HASH_COUNT_FILE=tmp_path / "hashes",
            LIMITS_LOGIN_FAILURES=LOGIN_FAILURES,
        )
        processes.migrated_and_seeded(env)
        started.append(processes.celery_worker(env, tmp_path, "attacks-worker"))
        web, base = processes.gunicorn(env, tmp_path, "attacks-node")
        started.append(web)
        yield Farm(env=env, base=base, address=address, dir=tmp_path, memcached=mc, web=web, started=started)


def _shell(farm: Farm, code: str) -> str:
    """Python run by another process of the farm (a manage.py shell)."""
    return processes.manage(farm.env, "shell", "-c", code)


def _values(farm: Farm, family: str) -> dict[str, tuple[bytes, int]]:
    """Every value memcached holds under keys of `family` ("user:", "session:"),
    with its flags (Django's cache says with them what the bytes are)."""
    host, port = farm.address.rsplit(":", 1)
    values = {}
    for item in keyspace.items(farm.address, f"{NAMESPACE}:{family}"):
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(b"mg %s v f\r\n" % item.key.encode())
            reply = b""
            while b"\r\n" not in reply or not reply.endswith(b"\r\n") or reply.count(b"\r\n") < 2:
                chunk = sock.recv(1 << 16)
                if not chunk:
                    break
                reply += chunk
        header, value = reply.split(b"\r\n", 1)
        if not header.startswith(b"VA "):
            continue  # gone meanwhile
        size = int(header.split()[1])
        flags = next(int(flag[1:]) for flag in header.split()[2:] if flag.startswith(b"f"))
        values[item.key] = (value[:size], flags)
    return values


def _write_back(farm: Farm, values: dict[str, tuple[bytes, int]]) -> None:
    for key, (value, flags) in values.items():
        keyspace.plant(farm.address, key, value, flags=flags)


def test_a_demoted_staff_users_old_copy_written_back_is_refused(farm):
    _shell(
        farm,
        "from django.contrib.auth import get_user_model; "
        "get_user_model().objects.create_user("
        f"'carol', password={DEMO_PASSWORD!r}, is_staff=True, is_superuser=True)",
    )
    carol = WebClient(farm.base).login("carol")
    assert carol.get("/admin/dashboard/").status_code == 200
    kept = _values(farm, "user:")
    assert kept, "no cached user to keep"
    # Demoted by another process (the admin's node), then the old copy is written back.
    _shell(
        farm,
        "from django.contrib.auth import get_user_model; u = get_user_model().objects.get(username='carol'); "
        "u.is_staff = u.is_superuser = False; u.save()",
    )
    _write_back(farm, kept)
    # Every process of the node learns of the change within a second or so; then
    # no request sees the dashboard (two gunicorn processes, several requests each).
    wait_for(
        lambda: carol.get("/admin/dashboard/", allow_redirects=False).status_code != 200,
        timeout=10,
        what="the demotion seen",
    )
    time.sleep(1.5)  # past REFRESH: every process has read the revocation
    _write_back(farm, kept)
    statuses = {carol.get("/admin/dashboard/", allow_redirects=False).status_code for _ in range(12)}
    assert 200 not in statuses, statuses


def test_a_session_written_back_after_logout_stays_logged_out(farm):
    alice = WebClient(farm.base).login("alice")
    assert alice.get("/jobs/").status_code == 200
    cookie = alice.session.cookies["sessionid"]
    kept = _values(farm, "session:")
    assert kept, "no cached session to keep"
    alice.post("/accounts/logout/")
    _write_back(farm, kept)
    time.sleep(1.5)  # past REFRESH: every process has read the revocation
    _write_back(farm, kept)
    replayed = requests.Session()
    replayed.cookies.set("sessionid", cookie)
    for _ in range(12):  # both gunicorn processes
        response = replayed.get(f"{farm.base}/jobs/", allow_redirects=False, timeout=10)
        assert response.status_code == 302 and "/accounts/login/" in response.headers["Location"]


def _create_user(farm: Farm, username: str) -> None:
    _shell(
        farm,
        "from django.contrib.auth import get_user_model; "
        f"get_user_model().objects.create_user({username!r}, password={DEMO_PASSWORD!r})",
    )


def _log_in(browser: requests.Session, farm: Farm, username: str, password: str) -> requests.Response:
    """One try at the login page, as a browser makes it (the form's CSRF token)."""
    browser.get(f"{farm.base}/accounts/login/", timeout=10).raise_for_status()
    return browser.post(
        f"{farm.base}/accounts/login/",
        data={
            "username": username,
            "password": password,
            "csrfmiddlewaretoken": browser.cookies["csrftoken"],
        },
        allow_redirects=False,
        timeout=10,
    )


# One name, spelled as Django's login form folds it to NFKC (fullwidth,
# mathematical bold italic), in capitals, and with spaces around it.
def _spellings(name: str) -> list[str]:
    fullwidth = "".join(chr(ord(c) - ord("a") + 0xFF41) for c in name)
    bold_italic = chr(ord(name[0]) - ord("a") + 0x1D482) + name[1:]
    return [name, fullwidth, bold_italic, name.upper(), f"  {name} "]


def test_a_throttled_username_is_throttled_however_it_is_spelled(farm):
    """After the limit of wrong passwords for `dave`, the right password is
    refused for every spelling Django would log in as dave."""
    _create_user(farm, "dave")
    browser = requests.Session()
    for _ in range(LOGIN_FAILURES):
        assert _log_in(browser, farm, "dave", "wrong").status_code == 200
    for spelling in _spellings("dave"):
        answer = _log_in(browser, farm, spelling, DEMO_PASSWORD)
        assert answer.status_code == 429, (spelling, answer.status_code)
        assert "Too many failed logins" in answer.text and "sessionid" not in browser.cookies


def test_wrong_passwords_spelled_differently_count_as_one_name(farm):
    """A guesser who changes the spelling gets no more tries than one who does not."""
    _create_user(farm, "erin")
    browser = requests.Session()
    spellings = _spellings("erin")
    for n in range(LOGIN_FAILURES):
        assert _log_in(browser, farm, spellings[n % len(spellings)], "wrong").status_code == 200
    assert _log_in(browser, farm, "erin", DEMO_PASSWORD).status_code == 429


def test_a_refused_login_hashes_no_password(farm):
    """A 429 costs no password hash: the counting hasher counts none for it,
    where a wrong password costs one."""
    _create_user(farm, "frank")
    browser = requests.Session()
    before = farm.hashes
    assert _log_in(browser, farm, "frank", "wrong").status_code == 200
    assert farm.hashes > before, "the counting hasher counts nothing: the test proves nothing"
    for _ in range(LOGIN_FAILURES - 1):
        assert _log_in(browser, farm, "frank", "wrong").status_code == 200
    before = farm.hashes
    for spelling in _spellings("frank"):
        for password in ("wrong", DEMO_PASSWORD):
            assert _log_in(browser, farm, spelling, password).status_code == 429
    assert farm.hashes == before, f"{farm.hashes - before} hashes for 10 refused logins"


def test_simultaneous_guesses_get_the_limit_and_no_more(farm):
    """The attack: forty wrong passwords sent at once, each on a session of
    its own, were all hashed before any was counted (17 of 40 evaluated
    where the limit is 10). Counted before the hash, atomically: the limit's
    worth of hashes, the rest refused unhashed, however they interleave."""
    _create_user(farm, "grace")
    browsers = [requests.Session() for _ in range(40)]
    for browser in browsers:
        browser.get(f"{farm.base}/accounts/login/", timeout=10).raise_for_status()
    barrier = threading.Barrier(len(browsers))

    def guess(browser: requests.Session) -> int:
        data = {"username": "grace", "password": "wrong", "csrfmiddlewaretoken": browser.cookies["csrftoken"]}
        barrier.wait(timeout=30)
        return browser.post(
            f"{farm.base}/accounts/login/", data=data, allow_redirects=False, timeout=60
        ).status_code

    before = farm.hashes
    with ThreadPoolExecutor(max_workers=len(browsers)) as pool:
        answers = list(pool.map(guess, browsers))
    assert sorted(answers) == [200] * LOGIN_FAILURES + [429] * (40 - LOGIN_FAILURES)
    assert farm.hashes - before == LOGIN_FAILURES


def test_the_admins_login_page_refuses_past_the_limit(farm):
    """Past the limit at /accounts/login/, the right password of a staff
    account is refused at /admin/login/ too, unhashed."""
    _shell(
        farm,
        "from django.contrib.auth import get_user_model; "
        f"get_user_model().objects.create_superuser('heidi', password={DEMO_PASSWORD!r})",
    )
    browser = requests.Session()
    for _ in range(LOGIN_FAILURES):
        assert _log_in(browser, farm, "heidi", "wrong").status_code == 200
    browser.get(f"{farm.base}/admin/login/", timeout=10).raise_for_status()
    before = farm.hashes
    answer = browser.post(
        f"{farm.base}/admin/login/?next=/admin/",
        data={
            "username": "heidi",
            "password": DEMO_PASSWORD,
            "csrfmiddlewaretoken": browser.cookies["csrftoken"],
        },
        allow_redirects=False,
        timeout=10,
    )
    assert answer.status_code == 429 and "Too many failed logins" in answer.text
    assert "sessionid" not in browser.cookies and farm.hashes == before


def test_a_disallowed_user_agent_is_refused_at_the_poll_gate_too(farm):
    """The node refuses the user agent BadBot (DISALLOWED_USER_AGENTS): its
    polls are refused whichever way the gate would answer them."""
    alice = WebClient(farm.base).login("alice")
    started = alice.start_report("top-customers", ALL_DATES)
    job, token_url = started["job"], started["public_progress_url"]
    alice.wait_until(job, lambda p: p["final"], timeout=60)
    # Answered from memcached by the gate's lanes, for a browser.
    assert requests.get(farm.base + token_url, timeout=10).status_code == 200
    assert alice.get(f"/progress/{job}/").status_code == 200
    bad = {"User-Agent": "Mozilla/5.0 BadBot/2.1"}
    for _ in range(6):  # both processes, both URLs, after the document is published
        assert requests.get(farm.base + token_url, headers=bad, timeout=10).status_code == 403
        assert alice.get(f"/progress/{job}/", headers=bad).status_code == 403


# Bodies Django's form parsers refuse, as a fuzzer sends them.
UNREADABLE_BODIES = [
    ("multipart/form-data", b"x=1"),  # no boundary
    ("multipart/form-data; boundary=\xff", b"x=1"),
    ("application/x-www-form-urlencoded; charset=latin-1", b"a=\xff\xfe"),
]


@pytest.mark.parametrize(("content_type", "body"), UNREADABLE_BODIES)
@pytest.mark.parametrize("path", ["/no/such/page/", "/progress/not-a-job/cancel/", "/accounts/login/"])
def test_a_body_django_cannot_parse_is_a_400_on_any_url(farm, content_type, body, path):
    """Anonymous, with a CSRF cookie (which makes Django's error pages read
    the body): a clear 4xx, never a 500."""
    answer = requests.post(
        farm.base + path,
        data=body,
        headers={"Content-Type": content_type, "Cookie": "csrftoken=" + "a" * 32},
        timeout=10,
    )
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text[-300:])
    assert "Traceback" not in answer.text


def _memory_of(address: str, prefix: str) -> int:
    """The memory memcached gives the entries and claims under `prefix`: each
    item's size (metadump's) in the smallest chunk of the slab classes in use
    that holds it (what -M runs out of)."""
    reply = keyspace.command(address, b"stats slabs\r\n", b"END\r\n").decode()
    chunks = sorted({int(line.split()[2]) for line in reply.splitlines() if ":chunk_size " in line})
    held = [i.size for i in keyspace.items(address, prefix) if ":m:" in i.key or ":c:" in i.key]
    return sum(next(chunk for chunk in chunks if chunk >= size) for size in held)


def test_the_fronts_byte_count_covers_what_memcached_really_holds(farm):
    """1,500 one-byte puts: the bytes the front counts against its caps are
    at least the memory their entries, and their claims once consumed, take
    in memcached, not the 1,500 bytes of their bodies."""
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    prefix = f"{NAMESPACE}:q:http.tiny:"
    with requests.Session() as producer:
        for _ in range(1500):
            put = producer.post(f"{farm.base}/queues/tiny/", data=b"x", headers=bearer, timeout=10)
            assert put.status_code == 201, put.text
    counted = int(keyspace.value_and_item(farm.address, f"{prefix}stat:bytes")[0] or 0)
    held = _memory_of(farm.address, prefix)
    assert held > 100 * 1500, held  # what a one-byte message really takes
    assert counted >= held, (counted, held)
    # Consumed (not yet acknowledged), their claims take memory too: still within the count.
    with requests.Session() as consumer:
        for _ in range(300):
            assert consumer.get(f"{farm.base}/queues/tiny/", headers=bearer, timeout=10).status_code == 200
    assert counted >= _memory_of(farm.address, prefix) > held


def test_a_flood_of_puts_leaves_room_for_the_farms_work(farm):
    """One holder of the queue token fills what the HTTP front may hold, in
    several queues, and the farm's own work goes on in the same memcached:
    a report starts and runs."""
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    accepted, statuses = 0, []
    deadline = time.monotonic() + 60
    with requests.Session() as flood:
        for n in range(200):  # bounded: 200 puts of 60 KB at most, or a minute
            if time.monotonic() > deadline:
                break
            response = flood.post(
                f"{farm.base}/queues/flood{n % 4}/", data=b"x" * 60_000, headers=bearer, timeout=10
            )
            statuses.append(response.status_code)
            accepted += 60_000 if response.status_code == 201 else 0
    assert 507 in statuses and set(statuses) <= {201, 507}, statuses
    refused = [s for s in statuses[-20:] if s == 507]
    assert len(refused) == 20, statuses[-20:]  # at capacity, it stays refused
    assert accepted <= 2 * 1024 * 1024 + 4 * 60_000, accepted  # the front's total, racing puts aside
    # The farm's work goes on.
    alice = WebClient(farm.base).login("alice")
    job = alice.start_report("top-customers", ALL_DATES)["job"]
    assert alice.wait_until(job, lambda p: p["final"], timeout=60)["state"] == "succeeded"
    stats = keyspace.stats(farm.address)
    assert stats.get("bytes", 0) < stats["limit_maxbytes"]


def test_a_token_url_leaves_no_token_in_the_logs(farm):
    """A poll answered, a wrong token (404), and memcached stalled under a
    queued job (503): the node's log file (gunicorn's access log with its
    default logger, Django's request log) shows `<token>` where the read
    token was. Last in this module: memcached is held still for a moment."""
    alice = WebClient(farm.base).login("alice")
    worker = next(p for p in farm.started if p.name == "attacks-worker")
    os.killpg(worker.proc.pid, signal.SIGSTOP)  # the job stays queued: only memcached knows its progress
    try:
        started = alice.start_report("top-customers", ALL_DATES)
        job, token_url = started["job"], started["public_progress_url"]
        token = token_url.strip("/").split("/")[-1]
        assert requests.get(farm.base + token_url, timeout=10).status_code == 200
        wrong = f"/progress/{job}/{'A' * 22}/"
        assert requests.get(farm.base + wrong, timeout=10).status_code == 404
        os.killpg(farm.memcached.proc.pid, signal.SIGSTOP)
        try:
            stalled = requests.get(farm.base + token_url, headers={"X-Progress-Missed": "1"}, timeout=30)
            # Anything else: what answered, and what it said, for the finding.
            assert stalled.status_code == 503 and int(stalled.headers["Retry-After"]) > 0, (
                stalled.status_code,
                dict(stalled.headers),
                stalled.text[:800],
            )
        finally:
            os.killpg(farm.memcached.proc.pid, signal.SIGCONT)
    finally:
        os.killpg(worker.proc.pid, signal.SIGCONT)
    alice.wait_until(job, lambda p: p["final"], timeout=60)
    log = wait_for(
        lambda: (text := farm.web.log()).count(f"/progress/{job}/<token>/") >= 4 and text,
        timeout=10,
        what="the polls in the node's log",
    )
    assert "Service Unavailable: /progress/" in log and "Not Found: /progress/" in log
    assert token not in log and "A" * 22 not in log
