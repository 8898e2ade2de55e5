"""Celery's broker on the farm's memcached: a kombu transport over
webfarm.queues (`CELERY_BROKER_URL=memcached://host:port`), and the
`dead_letters` command for any queue, the broker's included."""
