"""The queues' HTTP front on a real memcached: the happy path and one test per
status code."""

import json
import re
from urllib.parse import quote, unquote

import pytest
from django.test import Client

from tests import processes
from tests.hostile import HOSTILE
from tests.processes import free_port

TOKEN = "queue-token-for-tests"
AUTH = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}


@pytest.fixture(autouse=True)
def token(settings):
    settings.QUEUE_API_TOKEN = TOKEN


@pytest.fixture
def client() -> Client:
    return Client(raise_request_exception=False)


def _post(client, path, body=b"hello", content_type="application/octet-stream", **extra):
    return client.generic("POST", path, body, content_type=content_type, **{**AUTH, **extra})


def test_produce_consume_acknowledge(client):
    created = _post(client, "/queues/etl/", b"row 1")
    assert created.status_code == 201 and created.json() == {"queue": "etl", "index": 1}
    _post(client, "/queues/etl/", b"row 2")

    got = client.get("/queues/etl/", **AUTH)
    assert got.status_code == 200 and got.content == b"row 1"
    assert got["Queue-Index"] == "1" and got["Queue-Redelivered"] == "false"
    acked = _post(
        client,
        "/queues/etl/ack/",
        json.dumps({"receipt": got["Queue-Receipt"]}).encode(),
        content_type="application/json",
    )
    assert acked.status_code == 204

    second = client.get("/queues/etl/", **AUTH)
    rejected = _post(client, "/queues/etl/reject/", b"", HTTP_QUEUE_RECEIPT=second["Queue-Receipt"])
    assert rejected.status_code == 200 and rejected.json()["index"] == 3
    again = client.get("/queues/etl/", **AUTH)
    assert again.content == b"row 2" and again["Queue-Redelivered"] == "true"

    assert client.get("/queues/etl/", **AUTH).status_code == 204
    stats = client.get("/queues/etl/stats", **AUTH).json()
    assert (stats["in"], stats["out"], stats["acked"], stats["ready"]) == (3, 3, 1, 0)


def test_401_without_a_token_and_403_with_a_wrong_one(client):
    missing = client.get("/queues/etl/")
    assert missing.status_code == 401 and missing["WWW-Authenticate"] == "Bearer"
    wrong = client.get("/queues/etl/", HTTP_AUTHORIZATION="Bearer nope")
    assert wrong.status_code == 403 and wrong.json()["error"] == "Wrong token."
    assert client.get("/queues/etl/", HTTP_AUTHORIZATION=f"Basic {TOKEN}").status_code == 401


def test_403_for_everyone_while_no_token_is_configured(client, settings):
    settings.QUEUE_API_TOKEN = ""
    response = client.get("/queues/etl/", HTTP_AUTHORIZATION="Bearer ")
    assert response.status_code == 401
    response = client.get("/queues/etl/", HTTP_AUTHORIZATION="Bearer anything")
    assert response.status_code == 403 and "QUEUE_API_TOKEN" in response.json()["error"]


def test_400_for_bad_names_empty_messages_and_bad_receipts(client):
    assert client.get("/queues/a:b/", **AUTH).status_code == 400
    assert _post(client, "/queues/etl/", b"").status_code == 400
    for receipt in ["x", "00000000.1.zz", "0000000g.1.0123456789abcdef", "a b", "\x00"]:
        response = _post(
            client,
            "/queues/etl/ack/",
            json.dumps({"receipt": receipt}).encode(),
            content_type="application/json",
        )
        assert response.status_code == 400, receipt
    assert _post(client, "/queues/etl/ack/", b"[1]", content_type="application/json").status_code == 400
    assert _post(client, "/queues/etl/ack/", b"").status_code == 400


VALID_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_queue_names_are_refused_with_400(client, value):
    segment = quote(value, safe="")
    responses = [
        client.get(f"/queues/{segment}/", **AUTH),
        _post(client, f"/queues/{segment}/"),
        client.get(f"/queues/{segment}/stats", **AUTH),
    ]
    codes = [r.status_code for r in responses]
    if VALID_NAME.fullmatch(value):  # "null", "NaN", "aaaa…" are fine names
        assert codes == [204, 201, 200]
    elif not value or "/" in unquote(segment):
        assert codes == [404, 404, 404]  # no such URL
    else:
        assert codes == [400, 400, 400]


def test_413_for_a_message_over_the_limit(client, settings):
    settings.QUEUES = {**settings.QUEUES, "MAX_MESSAGE_BYTES": 1024}
    response = _post(client, "/queues/big/", b"x" * 1025)
    assert response.status_code == 413 and "1024" in response.json()["error"]
    assert client.get("/queues/big/", **AUTH).status_code == 204


def test_415_for_a_receipt_that_is_not_json(client):
    response = _post(
        client, "/queues/etl/ack/", b"receipt=x", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 415


def test_405_for_other_methods(client):
    assert client.delete("/queues/etl/", **AUTH).status_code == 405
    assert client.get("/queues/etl/ack/", **AUTH).status_code == 405


def test_503_with_retry_after_when_memcached_is_unreachable(client, settings):
    settings.PROGRESS = {**settings.PROGRESS, "SERVERS": [f"127.0.0.1:{free_port()}"]}
    response = _post(client, "/queues/down/")
    assert response.status_code == 503 and int(response["Retry-After"]) > 0
    assert client.get("/queues/down/", **AUTH).status_code == 503


def test_507_when_memcached_is_full(client, settings, tmp_path):
    process, address = processes.memcached(tmp_path, memory_mb=2, extra=["-M"])
    try:
        settings.PROGRESS = {**settings.PROGRESS, "SERVERS": [address]}
        statuses = []
        for _ in range(200):
            response = _post(client, "/queues/full/", b"x" * 60_000)
            statuses.append(response.status_code)
            if response.status_code != 201:
                break
        assert statuses[-1] == 507 and set(statuses[:-1]) == {201}
        assert "full" in response.json()["error"] and int(response["Retry-After"]) > 0
        # What was accepted is all there.
        accepted = 0
        while client.get("/queues/full/", **AUTH).status_code == 200:
            accepted += 1
        assert accepted == len(statuses) - 1
    finally:
        process.stop()
