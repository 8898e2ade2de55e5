"""Hostile strings in every URL segment, form field, cookie and header of a
real web node, on SQLite and on PostgreSQL: a 4xx with a message (or the
page a stranger gets), never a 500. PostgreSQL refuses what SQLite lets by
(a NUL byte in a text value), so both run."""

import http.client
import os
import uuid
from collections.abc import Iterator
from urllib.parse import quote

import pytest
import requests

from tests.harness import processes
from tests.harness.hostile import HOSTILE
from tests.harness.web import DEMO_PASSWORD, WebClient

pytestmark = pytest.mark.farm

COOKIES = ["sessionid", "csrftoken", "poll_voter", "poll_voted"]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def node(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """A web node on the given database, with alice and one job of hers."""
    base = tmp_path_factory.mktemp(f"hostile-{request.param}")
    with processes.stopped_after() as started:
        mc, address = processes.memcached(base)
        started.append(mc)
        if request.param == "postgresql":
            database = processes.postgres_database("webfarm_hostile")
            url = database.__enter__()
            request.addfinalizer(lambda: database.__exit__(None, None, None))
        else:
            url = f"sqlite:///{base / 'db.sqlite3'}"
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "MEMCACHED_SERVERS": address,
            "MEMCACHED_NAMESPACE": "hostile",
            "DJANGO_SECRET_KEY": "hostile-" + uuid.uuid4().hex,
            "CELERY_BROKER_URL": f"memcached://{address}",
        }
        processes.manage(env, "migrate", "--no-input", "-v", "0")
        out = processes.manage(
            env,
            "shell",
            "-c",
            "from django.contrib.auth import get_user_model; from webfarm.progress import services; "
            f"alice = get_user_model().objects.create_user('alice', password={DEMO_PASSWORD!r}); "
            "job = services.create_job(owner=alice, kind='top-customers', title='t', params={}); "
            "print(job.id)",
        )
        web, base_url = processes.gunicorn(env, base, f"hostile-{request.param}")
        started.append(web)
        yield base_url, out.strip().splitlines()[-1]


def _ok(response: requests.Response, what: str) -> None:
    assert response.status_code < 500, (what, response.status_code, response.text[:300])
    assert "Traceback" not in response.text, what


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_strings_never_answer_500(node, value):
    base, job = node
    alice = WebClient(base).login("alice")
    segment = quote(value, safe="")
    # A dot segment ("..") is resolved by the client before it is sent: another URL.
    strict = not segment.startswith(".")
    get, post = alice.get, alice.post
    for what, response in {
        "progress": get(f"/progress/{segment}/"),
        "progress by token": get(f"/progress/{job}/{segment}/"),
        "cancel": post(f"/progress/{segment}/cancel/"),
        "job page": get(f"/jobs/{segment}/"),
        "download": get(f"/jobs/{job}/files/{segment}"),
        "report form": get(f"/reports/{segment}/"),
        "report start": post("/reports/top-customers/", {"date_from": value, "date_to": value, "top": value}),
        "import page": get(f"/imports/{segment}/"),
        "rejected rows": get(f"/imports/{segment}/rejected.csv"),
        "import upload": post(
            "/imports/", files={"file": (value, value.encode("utf-8", "surrogatepass"), "text/csv")}
        ),
        "poll": get(f"/polls/{segment}/"),
        "vote": post(f"/polls/{segment}/vote/", {"choice": value}),
        "login": requests.post(
            f"{base}/accounts/login/", data={"username": value, "password": value}, timeout=10
        ),
        "next": get(f"/accounts/login/?next={segment}"),
        "queue": get(f"/queues/{segment}/", headers={"Authorization": f"Bearer {segment}"}),
        "stats": get("/stats/metrics", headers={"Authorization": f"Bearer {segment}"}),
        "forwarded": get("/polls/", headers={"X-Forwarded-For": segment}),
    }.items():
        _ok(response, what)
        if strict and what not in ("login", "next", "report form", "forwarded"):
            assert 400 <= response.status_code < 500, (what, value, response.status_code)


# A quoted cookie's octal escapes are decoded: "\\000" reaches Django as a NUL byte.
@pytest.mark.parametrize(
    "value",
    [
        '"aaaaaaaa\\000aaaaaaaaaaaaaaaaaaaaaaa"',
        "a\x00" * 16,
        "a" * 32 + "\x00",
        "%00" * 11,
        "💥" * 8,
        "a" * 5000,
    ],
)
def test_hostile_cookies_never_answer_500(node, value):
    base, job = node
    for name in COOKIES:
        # Sent as raw bytes: a browser-less attacker is not bound by cookie rules.
        header = {"Cookie": f"{name}=".encode() + value.encode()}
        for path in ("/", "/jobs/", f"/jobs/{job}/", "/polls/", f"/progress/{job}/"):
            _ok(requests.get(f"{base}{path}", headers=header, timeout=10), f"{name} on {path}")


def test_a_nul_in_a_download_name_is_a_404(node):
    base, job = node
    alice = WebClient(base).login("alice")
    for name in ("%00", "a%00b.csv", "top-customers.csv%00.png"):
        response = alice.get(f"/jobs/{job}/files/{name}")
        assert response.status_code == 404, (name, response.status_code)


@pytest.mark.parametrize("path", ["/accounts/login/", "/queues/etl/", "/no/such/page/"])
def test_a_body_the_site_refuses_unread_leaves_the_connection_usable(node, path):
    """The attack: a 200 KB POST refused without being read (CSRF, a missing
    token, an unknown URL) was answered with keep-alive, then gunicorn,
    which reads at most 64 KB of an unread body, closed the connection.
    nginx keeps connections to the nodes open and sent another person's POST
    on it: a 502. The node now reads such a body to its end before it
    answers, so the same connection serves the next request."""
    host, port = node[0].removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request(
            "POST", path, body=b"x" * 200_000, headers={"Content-Type": "application/octet-stream"}
        )
        refused = connection.getresponse()
        refused.read()
        assert 400 <= refused.status < 500 and not refused.will_close, (refused.status, refused.getheaders())
        connection.request("GET", "/accounts/login/")
        answered = connection.getresponse()
        assert answered.status == 200 and b"csrfmiddlewaretoken" in answered.read()
    finally:
        connection.close()
