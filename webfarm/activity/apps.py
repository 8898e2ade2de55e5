import logging

from django.apps import AppConfig

from webfarm.core import needs


class ActivityConfig(AppConfig):
    name = "webfarm.activity"
    label = "webfarm_activity"
    verbose_name = "Site activity log"

    def ready(self) -> None:
        needs.require(self)  # the apps it needs, named by a check where missing
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
