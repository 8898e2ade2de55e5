"""The poll gate (webfarm.progress.pollgate) answers progress polls through a real
gunicorn exactly as Django does without it: the same status, body and
headers for the token URL and the session URL, 200 and 304, for the owner,
another user and nobody; a session that logged out or whose user's password
changed is refused; the answers are counted. The farm's nodes run the gate
(demofarm.wsgi); a node of this test runs without it (PROGRESS_POLL_GATE=0)."""

import json
import uuid
from collections.abc import Iterator

import pytest
import requests

from tests.harness import processes
from tests.harness.marks import one_broker
from tests.harness.web import WebClient

pytestmark = pytest.mark.farm

ALL_DATES = {"date_from": "2024-01-01", "date_to": "2025-12-31"}
# Headers a server sets for itself, which differ between any two answers.
OWN_HEADERS = {"date", "server", "connection", "keep-alive"}
SECURITY = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}


@pytest.fixture(scope="module")
def plain(farm) -> Iterator[str]:
    """A web node of the same farm with the gate off: Django answers its polls."""
    node, url = processes.gunicorn({**farm.env, "PROGRESS_POLL_GATE": "0"}, farm.dir, "node-plain")
    yield url
    node.stop()


def _answer(url: str, cookies: object = None, **headers: str) -> tuple[int, bytes, dict[str, str]]:
    response = requests.get(url, cookies=cookies, headers=headers, timeout=10, allow_redirects=False)
    kept = {k.lower(): v for k, v in response.headers.items() if k.lower() not in OWN_HEADERS}
    return response.status_code, response.content, kept


def _same_on_both(farm, plain: str, path: str, cookies: object = None, **headers: str) -> tuple:
    gated = _answer(farm.node_a + path, cookies, **headers)
    assert gated == _answer(plain + path, cookies, **headers), path
    return gated


def _user(farm, username: str) -> WebClient:
    processes.manage(
        farm.env,
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model; "
        f"get_user_model().objects.create_user({username!r}, password='gate-pass-1234')",
    )
    return WebClient(farm.node_a).login(username, "gate-pass-1234")


def _polled(farm) -> int:
    out = processes.manage(
        farm.env,
        "shell",
        "-c",
        "from webfarm.core.client import get_client; "
        "print(int(get_client().get('c:requests_polled|area=progress|status=200') or 0))",
    )
    return int(out.strip().splitlines()[-1])


@one_broker
def test_the_gate_answers_as_django_does_to_everyone(farm, plain):
    owner = _user(farm, f"gate-{uuid.uuid4().hex[:6]}")
    started = owner.start_report("return-rates", {**ALL_DATES, "min_units": 10})
    job = started["job"]
    # Ended (cancelled, at once or at its next write): its document no longer changes.
    owner.post(f"/progress/{job}/cancel/", headers={"Accept": "application/json"})
    owner.wait_until(job, lambda p: p["final"], timeout=60, what="the report to end")

    token_url = started["public_progress_url"]
    status, body, headers = _same_on_both(farm, plain, token_url)
    assert status == 200 and json.loads(body)["job"] == job
    assert headers["cache-control"] == "no-store" and headers["content-type"] == "application/json"
    assert all(headers[name.lower()] == value for name, value in SECURITY.items())
    etag = headers["etag"]
    assert _same_on_both(farm, plain, token_url, **{"If-None-Match": etag})[0] == 304
    assert _same_on_both(farm, plain, token_url, **{"If-None-Match": '"other"'})[0] == 200
    assert _same_on_both(farm, plain, f"/progress/{job}/{'A' * 22}/")[0] == 404

    session_url = f"/progress/{job}/"
    cookies = owner.session.cookies
    status, body, headers = _same_on_both(farm, plain, session_url, cookies)
    assert status == 200 and json.loads(body)["job"] == job and headers["vary"] == "Cookie"
    assert _same_on_both(farm, plain, session_url, cookies, **{"If-None-Match": headers["etag"]})[0] == 304
    # Another user's poll finds no job; nobody's is asked to log in.
    other = farm.client("bob")
    assert _same_on_both(farm, plain, session_url, other.session.cookies)[0] == 404
    assert _same_on_both(farm, plain, session_url)[0] == 401
    assert _same_on_both(farm, plain, "/progress/not-a-job-id/")[0] == 401


@one_broker
def test_a_session_logged_out_or_whose_password_changed_is_refused_by_the_gate(farm, plain):
    name = f"gate-{uuid.uuid4().hex[:6]}"
    owner = _user(farm, name)
    job = owner.start_report("return-rates", {**ALL_DATES, "min_units": 10})["job"]
    path = f"/progress/{job}/"
    second = WebClient(farm.node_a).login(name, "gate-pass-1234")
    assert _answer(farm.node_a + path, second.session.cookies)[0] == 200

    old_cookies = requests.cookies.cookiejar_from_dict(second.session.cookies.get_dict())
    second.post("/accounts/logout/")
    assert _same_on_both(farm, plain, path, old_cookies)[0] == 401

    assert _answer(farm.node_a + path, owner.session.cookies)[0] == 200
    processes.manage(
        farm.env,
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model; "
        f"u = get_user_model().objects.get(username={name!r}); u.set_password('changed-9876'); u.save()",
    )
    assert _same_on_both(farm, plain, path, owner.session.cookies)[0] == 401


@one_broker
def test_polls_the_gate_answers_are_counted(farm):
    alice = farm.client("alice")
    started = alice.start_report("return-rates", {**ALL_DATES, "min_units": 10})
    before = _polled(farm)
    for _ in range(20):
        assert requests.get(farm.node_a + started["public_progress_url"], timeout=10).status_code == 200
    # Each node sends its counts once a second.
    processes.wait_for(lambda: _polled(farm) >= before + 20, timeout=15, what="the polls to be counted")
