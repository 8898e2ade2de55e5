from django.apps import AppConfig
from kombu.transport import TRANSPORT_ALIASES

from webfarm.broker.transport import broker_ring
from webfarm.core import needs
from webfarm.queues.rings import add_ring


class BrokerConfig(AppConfig):
    name = "webfarm.broker"
    label = "webfarm_broker"
    verbose_name = "Celery broker on memcached"

    def ready(self) -> None:
        needs.require(self)  # the apps it needs, named by a check where missing
        # CELERY_BROKER_URL=memcached://host:port in any project that installs
        # this app: Celery connects after Django is set up, on web nodes and workers.
        TRANSPORT_ALIASES.setdefault("memcached", "webfarm.broker.transport:Transport")
        # Celery's queues live on the broker's ring: the dashboard and the
        # counter harvester read them there.
        add_ring("broker", broker_ring)
