"""A project that leaves out an app a feature needs, or the middleware the
Tasks API needs, hears so from `manage.py check`: the check's id, what is
missing and how to add it, never a traceback. Each runs the check in a
process of its own, on the test project told what to leave out."""

import json
import subprocess
import sys

import pytest

from tests.harness.processes import ROOT
from tests.harness.suites import library_env
from tests.project import settings as project

SHOP = "tests.project.shop"
OWNERS = "webfarm.djangotasks.owners.TaskOwnerMiddleware"


def _check(memcached_server: str, namespace: str, **told: object) -> subprocess.CompletedProcess:
    env = library_env(memcached_server, namespace)
    env["WEBFARM_TEST_SETTINGS"] = json.dumps(told)
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def _without(*names: str) -> list[str]:
    return [app for app in project.INSTALLED_APPS if app not in names]


@pytest.mark.parametrize(
    ("left_out", "said"),
    [
        (
            ("webfarm.core",),
            "(webfarm_queues.E010) webfarm.queues needs webfarm.core in INSTALLED_APPS",
        ),
        (
            ("webfarm.progress", SHOP),
            "(webfarm_dashboard.E010) webfarm.dashboard needs webfarm.progress in INSTALLED_APPS",
        ),
        (
            ("webfarm.stats",),
            "(webfarm_dashboard.E010) webfarm.dashboard needs webfarm.stats in INSTALLED_APPS",
        ),
    ],
)
def test_an_app_left_out_that_another_needs_is_named(
    memcached_server, progress_on_real_memcached, left_out, said
):
    result = _check(memcached_server, progress_on_real_memcached, INSTALLED_APPS=_without(*left_out))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert said in result.stderr
    assert 'HINT: add "webfarm.' in result.stderr and "INSTALLED_APPS += webfarm.APPS" in result.stderr


def test_the_memcached_broker_without_its_app_is_named(memcached_server, progress_on_real_memcached):
    result = _check(
        memcached_server,
        progress_on_real_memcached,
        INSTALLED_APPS=_without("webfarm.broker"),
        CELERY_BROKER_URL=f"memcached://{memcached_server}",
    )
    assert result.returncode == 1 and "(webfarm_core.E004)" in result.stderr, result.stderr
    assert 'add "webfarm.broker" to INSTALLED_APPS' in result.stderr


def test_the_tasks_backend_without_its_app_is_named(memcached_server, progress_on_real_memcached):
    result = _check(
        memcached_server,
        progress_on_real_memcached,
        INSTALLED_APPS=_without("webfarm.djangotasks"),
        MIDDLEWARE=[m for m in project.MIDDLEWARE if m != OWNERS],
    )
    assert result.returncode == 1 and "(webfarm_core.E005)" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_the_owner_middleware_left_out_or_before_authentication_is_named(
    memcached_server, progress_on_real_memcached
):
    left_out = _check(
        memcached_server,
        progress_on_real_memcached,
        MIDDLEWARE=[m for m in project.MIDDLEWARE if m != OWNERS],
    )
    assert (
        left_out.returncode == 1
        and f"(webfarm_djangotasks.E003) MIDDLEWARE lacks {OWNERS}" in left_out.stderr
    )
    early = _check(
        memcached_server, progress_on_real_memcached, MIDDLEWARE=[OWNERS, *project.MIDDLEWARE[:-1]]
    )
    assert early.returncode == 1 and "(webfarm_djangotasks.E004)" in early.stderr, early.stderr


def test_the_project_as_it_is_passes(memcached_server, progress_on_real_memcached):
    result = _check(memcached_server, progress_on_real_memcached)
    assert result.returncode == 0, result.stderr
