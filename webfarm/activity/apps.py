import logging

from django.apps import AppConfig


class ActivityConfig(AppConfig):
    name = "webfarm.activity"
    label = "webfarm_activity"
    verbose_name = "Site activity log"

    def ready(self) -> None:
        from webfarm.activity import checks  # noqa: F401 (registers the checks)
        from webfarm.activity.handler import LOGGER, QUEUE_NAME, SiteLogHandler
        from webfarm.queues.front import declare_internal

        declare_internal(lambda: QUEUE_NAME)
        # The site log's lines go to memcached from every node, unless the
        # project's LOGGING gives the logger handlers of its own.
        site_log = logging.getLogger(LOGGER)
        if not site_log.handlers:
            site_log.addHandler(SiteLogHandler())
            site_log.setLevel(logging.INFO)
            site_log.propagate = False
