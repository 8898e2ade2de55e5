"""Django's Tasks API (`django.tasks`; on Django 5.2 the django-tasks
backport) on the farm: tasks run as jobs on its Celery workers, with live
progress, metadata, cancel, limits and results readable from any node.

    TASKS = {"default": {"BACKEND": "webfarm.djangotasks.backend.CeleryBackend"}}

    @task(takes_context=True)
    def rebuild_index(context, shop_id):
        context.progress.stage("indexing", total=n)      # our bar: stages, counts, ETA
        context.metadata["indexed"] = 0                  # django/new-features #141
        context.save_metadata()

docs/tasks.md says the rest. `task` is Django's on 6 and the backport's on
5.2, so one site's task modules run on both.
"""

from webfarm.djangotasks.compat import task
from webfarm.djangotasks.owners import owned_by

__all__ = ["owned_by", "task"]
