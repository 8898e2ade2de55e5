from django.apps import AppConfig


class PollsConfig(AppConfig):
    name = "demofarm.polls"
    label = "polls"
    verbose_name = "Polls"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from demofarm.polls import snapshot  # noqa: F401 (connects the signals that forget cached polls)
        from demofarm.polls.conf import get_config
        from webfarm.queues.front import declare_internal

        declare_internal(lambda: get_config()["QUEUE"])
