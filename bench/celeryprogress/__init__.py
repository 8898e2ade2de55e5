"""celery-progress 0.5 as a team runs it: a `django-admin startproject`
site (its default middleware), celery_progress's URLs, results in Redis.
bench.endpoint polls it beside ours."""
