"""The web farm: its reusable apps (webfarm.core, webfarm.queues, ...) and
the site that runs them (settings, URLs, the Celery app, the launchers).

Importing an app starts nothing: the site's Celery app is made when the
site's own app is ready (webfarm.apps), or by `celery -A webfarm`."""
