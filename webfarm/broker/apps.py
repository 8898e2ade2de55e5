from django.apps import AppConfig


class BrokerConfig(AppConfig):
    name = "webfarm.broker"
    label = "webfarm_broker"
    verbose_name = "Celery broker on memcached"
