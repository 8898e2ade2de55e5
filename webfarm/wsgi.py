import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webfarm.settings")
application = get_wsgi_application()

from webfarm.startup import refuse_to_start_misconfigured  # noqa: E402 (settings first)

refuse_to_start_misconfigured("web")
