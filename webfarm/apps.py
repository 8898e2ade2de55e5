from django.apps import AppConfig


class SiteConfig(AppConfig):
    """The site itself: its management commands (seed_demo, a migrate that
    adopts the old app labels) and its Celery app."""

    name = "webfarm"
    verbose_name = "Web farm site"

    def ready(self) -> None:
        # Tasks sent from a web process go through the site's app (its broker,
        # its queue), not Celery's default one: made here, once Django is set up.
        from webfarm import celery  # noqa: F401
