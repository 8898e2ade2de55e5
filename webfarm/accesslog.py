"""gunicorn's access log without a line per poll (--logger-class webfarm.accesslog.PollsCounted).

A page with progress bars polls every second or two: one line each buries
everything else on `make run`'s console and fills a farm's logs. Answered
polls are counted instead (webfarm.activity.middleware, `requests_polled`), failed
ones are logged like any other request, with the read token left out (it is
a bearer secret); webfarm.activity.polling says what a poll is.
"""

from typing import Any

from gunicorn.glogging import Logger

from webfarm.activity.polling import is_poll
from webfarm.core.paths import hide_tokens


class PollsCounted(Logger):
    def access(self, resp: Any, req: Any, environ: dict, request_time: Any) -> None:
        status = getattr(resp, "status_code", None)
        answered = isinstance(status, int) and status < 400
        if answered and is_poll(environ.get("REQUEST_METHOD"), environ.get("PATH_INFO")):
            return
        path = environ.get("RAW_URI") or environ.get("PATH_INFO") or ""
        if "/progress/" in path:
            environ = {
                **environ,
                "RAW_URI": hide_tokens(environ.get("RAW_URI", "")),
                "PATH_INFO": hide_tokens(environ.get("PATH_INFO", "")),
            }
        super().access(resp, req, environ, request_time)
