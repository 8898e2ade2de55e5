"""gunicorn's access log without a line per poll (--logger-class webfarm.activity.accesslog.PollsCounted).

A page with progress bars polls every second or two: one line each buries
everything else on `make run`'s console and fills a farm's logs. Answered
polls are counted instead (webfarm.activity.middleware, `requests_polled`), failed
ones are logged like any other request; webfarm.activity.polling says what a
poll is. The read token is left out of every line whatever the logger class
(webfarm.core.paths filters gunicorn's access log).
"""

from typing import Any

from gunicorn.glogging import Logger

from webfarm.activity.polling import is_poll


class PollsCounted(Logger):  # type: ignore[misc]  # gunicorn ships no types
    def access(self, resp: Any, req: Any, environ: dict, request_time: Any) -> None:
        status = getattr(resp, "status_code", None)
        answered = isinstance(status, int) and status < 400
        if answered and is_poll(environ.get("REQUEST_METHOD"), environ.get("PATH_INFO")):
            return
        super().access(resp, req, environ, request_time)
