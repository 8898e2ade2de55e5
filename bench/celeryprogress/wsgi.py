import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.celeryprogress.settings")
application = get_wsgi_application()

from bench.celeryprogress.celery import app  # noqa: E402, F401 (celery_progress reads the current app's results)
