from django.apps import AppConfig


class PollsConfig(AppConfig):
    name = "polls"
    verbose_name = "Polls"
    default_auto_field = "django.db.models.BigAutoField"
