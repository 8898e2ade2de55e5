"""{% progress_bar %} and {% progress_assets %}: what a page gets from one tag."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.middleware.csrf import get_token
from django.template import Context, Template
from django.test import RequestFactory

from webfarm.progress import services, store
from webfarm.progress.states import State


@pytest.fixture
def alice(db):
    return get_user_model().objects.create_user("alice", password="pw-alice-1")


def test_a_bar_for_a_job_from_one_tag(alice):
    job = services.create_job(owner=alice, kind="demo", title="Demo", params={})
    request = RequestFactory().get("/jobs/")
    request.user = alice
    get_token(request)
    page = Template(
        "{% load webfarm_progress %}{% progress_assets %}{% progress_bar job record reload_on_success=True %}"
    ).render(Context({"job": job, "record": store.read(job.id), "request": request}))
    assert f'data-progress-url="/progress/{job.id}/{job.read_token}/"' in page
    assert "data-reload-on-success" in page and 'name="csrfmiddlewaretoken"' in page
    assert re.search(r"/static/webfarm_progress/progress(\.\w+)?\.js", page)
    assert re.search(r"/static/webfarm_progress/progress(\.\w+)?\.css", page)
    assert 'role="progressbar"' in page and "queued" in page
    # Nothing of the template's own syntax reaches the page (a {# #} over two
    # lines is not a comment in Django).
    text = re.sub(r"<[^>]+>", " ", page)
    assert not re.search(r"\{[#%{]|[#%}]\}", text), text


def test_a_page_read_before_the_end_leaves_its_bar_live_so_it_reloads(alice):
    """Found by the browser tests under load: an import page read the job's
    row (running), the job ended, then the tag read memcached's record
    (succeeded) and drew a bar already ended, which polls no more. The page,
    rendered from the running row, never reloaded to show what the job made.
    A bar whose row is not ended yet stays live, and its first poll ends it."""
    job = services.create_job(owner=alice, kind="demo", title="Demo", params={})
    row = type(job).objects.get(pk=job.id)  # as the page read it: queued
    record = services.begin_job(job)
    services.finish_job(record, State.SUCCEEDED, ending=State.RUNNING)
    request = RequestFactory().get("/jobs/")
    request.user = alice
    page = Template("{% load webfarm_progress %}{% progress_bar job reload_on_success=True %}").render(
        Context({"job": row, "request": request})
    )
    assert "state-succeeded" in page and "data-reload-on-success" in page
    assert "data-final" not in page
    # The page read after the end draws it ended.
    ended = Template("{% load webfarm_progress %}{% progress_bar job %}").render(
        Context({"job": type(job).objects.get(pk=job.id), "request": request})
    )
    assert "data-final" in ended
