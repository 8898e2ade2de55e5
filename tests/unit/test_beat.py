"""The library's periodic work as beat entries (webfarm.core.beat), on the
project's Celery app without a line of the project's."""

import os
import subprocess
import sys
from importlib import import_module
from pathlib import Path

from celery import Celery, current_app
from celery import beat as celery_beat
from celery.signals import beat_init

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


def test_a_starting_beat_gets_the_installed_apps_entries_under_the_site_s_own(tmp_path):
    app = Celery("site", set_as_current=False)
    faster = {"task": beat.REAPER, "schedule": 1.0}
    app.conf.beat_schedule = {"reap-lost-jobs": faster, "site-chore": {"task": "site.chore", "schedule": 9.0}}
    service = celery_beat.Service(app=app, schedule_filename=str(tmp_path / "schedule"))
    beat_init.send(sender=service)  # as `celery beat` sends it, once its scheduler is made
    scheduled = service.scheduler.schedule
    assert scheduled["reap-lost-jobs"].schedule.run_every.total_seconds() == 1.0  # the site's
    assert scheduled["site-chore"].task == "site.chore"
    assert {"purge-ended-jobs", "clear-expired-sessions", "harvest-counters"} <= set(scheduled)
    service.scheduler.close()


def test_a_project_that_schedules_nothing_gets_the_reaper_on_its_beat(tmp_path):
    # The test project sets no CELERY_BEAT_SCHEDULE; its Celery app is made before Django starts.
    code = (
        "import sys\nfrom celery import Celery, beat\nfrom celery.signals import beat_init\n"
        "app = Celery('project')\n"
        "app.config_from_object('django.conf:settings', namespace='CELERY')\n"
        "import django; django.setup()\n"
        "service = beat.Service(app=app, schedule_filename=sys.argv[1])\n"
        "beat_init.send(sender=service)\n"
        "print(sorted(e.task for e in service.scheduler.schedule.values()))"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.project.settings"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "schedule")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert beat.REAPER in out.stdout and "webfarm.stats.harvest_counters" in out.stdout
