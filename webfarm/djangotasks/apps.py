from importlib import import_module

from django.apps import AppConfig

from webfarm.core import needs
from webfarm.djangotasks.compat import BACKPORT


class DjangoTasksConfig(AppConfig):
    name = "webfarm.djangotasks"
    label = "webfarm_djangotasks"
    verbose_name = "Django's Tasks API on the farm"

    def ready(self) -> None:
        needs.require(self)  # the apps it needs, named by a check where missing
        # Its job types, and task_finished for every way a task's job ends; its checks.
        import_module("webfarm.djangotasks.jobs")
        import_module("webfarm.djangotasks.checks")
        if BACKPORT:
            # What the backport's own app would load: its system check of
            # TASKS and its logging of the signals. A site then lists this app
            # alone, on Django 5.2 as on 6.
            import_module("django_tasks.checks")
            import_module("django_tasks.signals")
