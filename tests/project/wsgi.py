"""The test project's WSGI file, as docs/install.md writes one."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.project.settings")
application = get_wsgi_application()

from webfarm.progress.pollgate import PollGate  # noqa: E402 (after the apps are loaded)

application = PollGate(application)
