from django.apps import AppConfig


class DjangoTasksConfig(AppConfig):
    name = "webfarm.djangotasks"
    label = "webfarm_djangotasks"
    verbose_name = "Django's Tasks API on the farm"
