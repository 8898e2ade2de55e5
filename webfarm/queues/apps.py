from django.apps import AppConfig

from webfarm.core import needs


class QueuesConfig(AppConfig):
    name = "webfarm.queues"
    label = "webfarm_queues"
    verbose_name = "Message queues on memcached"

    def ready(self) -> None:
        needs.require(self)  # the apps it needs, named by a check where missing
        from webfarm.core.poolchange import add_leftover_check
        from webfarm.queues import checks, conf  # noqa: F401  (registers checks and signal receivers)
        from webfarm.queues.leftovers import leftovers

        add_leftover_check(leftovers)
