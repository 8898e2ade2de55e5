"""The demo's Celery app: beat's tasks on the housekeeping queue, and an
app made in the site's ready() (demofarm/apps.py) stays the current one."""

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]


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


def test_starting_django_leaves_celery_s_current_app_to_the_project():
    """An app module that imports celery's current_app while Django loads the
    apps, before the project has made its Celery app (the demo makes it in its
    ready()), makes Celery's fallback app the default for every thread: a web
    server's request threads then sent tasks to an AMQP broker nobody runs,
    and no job started (webfarm.core.apps once did, for the beat schedule)."""
    code = (
        "import threading, django\ndjango.setup()\nfrom celery import current_app\n"
        "seen = []\nthread = threading.Thread(target=lambda: seen.append(current_app.main))\n"
        "thread.start(); thread.join(); print(seen[0])"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "demofarm.settings"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "demofarm"
