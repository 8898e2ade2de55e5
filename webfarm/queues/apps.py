from django.apps import AppConfig


class QueuesConfig(AppConfig):
    name = "webfarm.queues"
    label = "webfarm_queues"
    old_labels = ("queues",)
    verbose_name = "Message queues on memcached"

    def ready(self) -> None:
        from webfarm.queues import checks, conf  # noqa: F401  (registers checks and signal receivers)
