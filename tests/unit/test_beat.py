"""The library's periodic work as beat entries (webfarm.core.beat), and the
warning a site without the reaper gets."""

import os
import subprocess
import sys
from importlib import import_module
from pathlib import Path

from celery import current_app
from django.conf import settings
from django.core import checks

from webfarm.core import beat

ROOT = Path(__file__).resolve().parents[2]
EVERY_APP = ["webfarm.core", "webfarm.queues", "webfarm.progress", "webfarm.activity", "webfarm.stats"]


def test_each_entry_names_a_task_its_app_defines():
    entries = beat.schedule([*EVERY_APP, "django.contrib.admin"], mirrors=True)
    for app in EVERY_APP:
        import_module(f"{app}.tasks")
    assert {entry["task"] for entry in entries.values()} <= set(current_app.tasks)
    assert len(entries) == 7


def test_only_the_apps_a_site_installed_and_its_intervals():
    entries = beat.schedule(["webfarm.core", "webfarm.progress.apps.ProgressConfig"], reap_every=2.0)
    assert sorted(entries) == ["clear-expired-sessions", "purge-ended-jobs", "reap-lost-jobs"]
    assert entries["reap-lost-jobs"] == {
        "task": beat.REAPER,
        "schedule": 2.0,
        "options": {"expires": 4.0},  # no pile of stale sends while no worker is up
    }
    # Mirrors are repaired only where the queues app is.
    assert "repair-queue-mirrors" not in beat.schedule(["webfarm.progress"], mirrors=True)


def test_a_site_without_the_reaper_on_its_schedule_is_warned(settings):
    def warned() -> bool:
        return "webfarm_progress.W002" in [m.id for m in checks.run_checks(databases=[])]

    assert not warned()  # this site schedules it
    settings.CELERY_BEAT_SCHEDULE = {}
    assert warned()
    del settings.CELERY_BEAT_SCHEDULE
    assert warned()
    settings.CELERY_BEAT_SCHEDULE = beat.schedule(["webfarm.progress"])
    assert not warned()


def test_the_site_sends_every_beat_task_to_its_housekeeping_queue():
    # Settings are read once, at start: a process of its own, as a worker or beat starts.
    code = (
        "import django; django.setup()\n"
        "from django.conf import settings\nfrom demofarm.celery import app\n"
        "tasks = {entry['task'] for entry in settings.CELERY_BEAT_SCHEDULE.values()}\n"
        "print(sorted({app.amqp.router.route({}, task)['queue'].name for task in tasks}), len(tasks))\n"
        "print(app.amqp.router.route({}, 'webfarm.progress.run_job')['queue'].name)"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "demofarm.settings", "HOUSEKEEPING_QUEUE": "chores"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[0] == f"['chores'] {len(settings.CELERY_BEAT_SCHEDULE)}"
    assert out[1] == settings.CELERY_TASK_DEFAULT_QUEUE  # the reports stay where every worker serves
    assert "flush-votes" in settings.CELERY_BEAT_SCHEDULE
