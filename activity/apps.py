from django.apps import AppConfig


class ActivityConfig(AppConfig):
    name = "activity"
    verbose_name = "Site activity log"

    def ready(self) -> None:
        from activity.handler import QUEUE_NAME
        from queues.front import declare_internal

        declare_internal(lambda: QUEUE_NAME)
