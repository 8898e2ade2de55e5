from django.apps import AppConfig


class QueuesConfig(AppConfig):
    name = "webfarm.queues"
    label = "webfarm_queues"
    verbose_name = "Message queues on memcached"

    def ready(self) -> None:
        from webfarm.core.poolchange import add_leftover_check
        from webfarm.queues import checks, conf  # noqa: F401  (registers checks and signal receivers)
        from webfarm.queues.leftovers import leftovers

        add_leftover_check(leftovers)
