"""A Content-Security-Policy on every answer of the site.

No page of the site or of the apps needs an inline script, an inline style,
`eval` or another origin: the policy says so (CONTENT_SECURITY_POLICY), so
that markup someone manages to slip into a page (a planted document's text,
a name in a list) cannot run or load anything. Django 6 has the same in its
own middleware (SECURE_CSP); Django 5.2, on which the site also runs, has
none. The browser test walks every page and counts the policy's reports:
none (tests/browser/test_browser.py).
"""

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

# The answers a browser renders as a page, whose scripts and styles would run.
DOCUMENTS = ("text/html", "application/xhtml+xml", "image/svg+xml")


class ContentSecurityPolicyMiddleware:
    # A poll's answer is JSON (or a 304), which no browser renders as a page:
    # only documents carry the policy, so the poll gate, which answers polls
    # before the middleware, and nginx's fast path answer as Django does.
    poll_skippable = True

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if settings.CONTENT_SECURITY_POLICY and response.get("Content-Type", "").startswith(DOCUMENTS):
            response.headers.setdefault("Content-Security-Policy", settings.CONTENT_SECURITY_POLICY)
        return response
