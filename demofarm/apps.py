from django.apps import AppConfig


class SiteConfig(AppConfig):
    """The demo site itself: its templates (which override the apps'), its
    static files, its command seed_demo, and its Celery app."""

    name = "demofarm"
    verbose_name = "Demo farm site"

    def ready(self) -> None:
        # Tasks sent from a web process go through the site's app (its broker,
        # its queue), not Celery's default one: made here, once Django is set up.
        from demofarm import (
            celery,  # noqa: F401
            secret,  # noqa: F401 (registers its check of the dev key)
        )
