"""The demo farm: a site built on the webfarm library (settings, URLs, WSGI,
the Celery app, the launchers) with its own apps: report jobs (reports),
customer imports (imports) and polls (polls).

It stands beside the library and is not in its wheel: nothing in webfarm
imports it. Importing it starts nothing: the Celery app is made when the
site's own app is ready (demofarm.apps), or by `celery -A demofarm`."""
