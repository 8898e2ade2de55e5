from django.apps import AppConfig


class ActivityConfig(AppConfig):
    name = "webfarm.activity"
    label = "webfarm_activity"
    verbose_name = "Site activity log"

    def ready(self) -> None:
        from webfarm.activity.handler import QUEUE_NAME
        from webfarm.queues.front import declare_internal

        declare_internal(lambda: QUEUE_NAME)
