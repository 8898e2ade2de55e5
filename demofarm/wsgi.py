import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demofarm.settings")
django_application = get_wsgi_application()

from demofarm.startup import refuse_to_start_misconfigured  # noqa: E402 (settings first)
from webfarm.progress.pollgate import PollGate  # noqa: E402 (the apps are loaded first)

# Progress polls are answered before Django's middleware chain (PROGRESS["POLL_GATE"]).
application = PollGate(django_application)

refuse_to_start_misconfigured("web")
