from django.apps import AppConfig


class QueuesConfig(AppConfig):
    name = "queues"
    verbose_name = "Message queues on memcached"

    def ready(self) -> None:
        from queues import checks, conf  # noqa: F401  (registers checks and signal receivers)
