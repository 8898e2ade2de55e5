"""A task halfway through, as celery-progress's ProgressRecorder leaves it in
the result backend: `python -m bench.celeryprogress.seed TASK_ID`."""

import os
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.celeryprogress.settings")
django.setup()

from bench.celeryprogress.celery import app  # noqa: E402

meta = {"pending": False, "current": 50, "total": 100, "percent": 50.0, "description": "halfway"}
app.backend.store_result(sys.argv[1], meta, "PROGRESS")
