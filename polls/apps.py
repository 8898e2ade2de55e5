from django.apps import AppConfig


class PollsConfig(AppConfig):
    name = "polls"
    verbose_name = "Polls"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from polls import snapshot  # noqa: F401 (connects the signals that forget cached polls)
        from polls.conf import get_config
        from queues.front import declare_internal

        declare_internal(lambda: get_config()["QUEUE"])
