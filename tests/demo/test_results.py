"""Result files in the database: chunked, hashed, streamed, never half-served."""

import hashlib
import os

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from demofarm.reports import results
from demofarm.reports.models import ResultChunk, ResultFile
from webfarm.progress import services

pytestmark = pytest.mark.django_db


@pytest.fixture
def job():
    alice = get_user_model().objects.create_user("alice", password="x")
    return services.create_job(owner=alice, kind="top-customers", title="t", params={})


def test_a_file_larger_than_a_memcached_item_round_trips_in_chunks(job, settings):
    settings.REPORTS = {**settings.REPORTS, "RESULT_CHUNK_BYTES": 256 * 1024}
    data = os.urandom(3 * 1024 * 1024 + 17)  # over memcached's 1 MB item limit
    stored = results.save_bytes(job, "big.bin", "application/octet-stream", data)
    assert stored.complete and stored.size == len(data)
    assert stored.chunks == ResultChunk.objects.filter(file=stored).count() == 13
    assert stored.sha256 == hashlib.sha256(data).hexdigest()
    assert results.read_all(stored) == data

    client = Client()
    client.force_login(job.owner)
    response = client.get(f"/jobs/{job.id}/files/big.bin")
    assert response.status_code == 200 and response.streaming
    assert int(response["Content-Length"]) == len(data)
    assert b"".join(response.streaming_content) == data


def test_an_incomplete_file_is_not_served(job):
    writer = results.ResultWriter(job, "partial.csv", "text/csv")
    writer.write(b"a,b\n")  # the job died before close()
    client = Client()
    client.force_login(job.owner)
    assert client.get(f"/jobs/{job.id}/files/partial.csv").status_code == 404
    assert not ResultFile.objects.get(name="partial.csv").complete


def test_a_retried_job_replaces_its_file(job):
    results.save_bytes(job, "out.csv", "text/csv", b"old")
    results.save_bytes(job, "out.csv", "text/csv", b"new")
    assert results.read_all(ResultFile.objects.get(job=job, name="out.csv")) == b"new"
