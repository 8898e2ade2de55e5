"""What the machine-facing views share: JSON errors, bearer tokens, the client's address."""

import hashlib
import hmac
import ipaddress
import json
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.cache import get_conditional_response
from django.utils.http import parse_etags
from django.views.decorators.csrf import csrf_exempt

View = Callable[..., HttpResponse]


def polled(view: View) -> View:
    """Mark a view that pages poll every second or two (a bar, live totals,
    metrics): logs count its answers instead of writing a line each
    (webfarm.activity.polling). Put it above the view's other decorators."""
    view.polled = True  # type: ignore[attr-defined]
    return view


def json_error(status: int, message: str, *, retry_after: int | None = None) -> JsonResponse:
    response = JsonResponse({"error": message}, status=status)
    response["Cache-Control"] = "no-store"
    if retry_after is not None:
        response["Retry-After"] = str(retry_after)
    return response


def polled_body(document: object) -> tuple[bytes, str]:
    """A polled document's body and ETag. `document` may be JSON already
    (bytes), sent as it is."""
    body = document if isinstance(document, bytes) else json.dumps(document, separators=(",", ":")).encode()
    return body, f'"{hashlib.blake2b(body, digest_size=12).hexdigest()}"'


def unchanged(if_none_match: str | None, etag: str) -> bool:
    """Whether a GET with this If-None-Match gets a 304, as Django's
    get_conditional_response judges it (a weak comparison; `*` matches)."""
    if not if_none_match:
        return False
    if if_none_match == etag:  # what a bar sends back: its last answer's ETag
        return True
    etags = parse_etags(if_none_match)
    return etags == ["*"] or etag.strip("W/") in (e.strip("W/") for e in etags)


def json_polled(request: HttpRequest, document: object) -> HttpResponse:
    """A JSON document that clients poll: an ETag (304 when unchanged) and
    no-store, since a cached copy would freeze whatever shows it. `document`
    may be JSON already (bytes), sent as it is."""
    body, etag = polled_body(document)
    response = get_conditional_response(request, etag=etag) or HttpResponse(
        body, content_type="application/json"
    )
    response["ETag"] = etag
    response["Cache-Control"] = "no-store"
    return response


def client_address(request: HttpRequest) -> str | None:
    """The client's address. Behind a balancer listed in TRUSTED_PROXIES it is
    the last address in X-Forwarded-For: the one the balancer itself added
    (nginx's $proxy_add_x_forwarded_for). Earlier entries come from the
    client and are not believed; nor is the header from anyone else. A
    project that sets no TRUSTED_PROXIES trusts no balancer."""
    remote = request.META.get("REMOTE_ADDR") or None
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if remote not in getattr(settings, "TRUSTED_PROXIES", ()) or not forwarded:
        return remote
    last = forwarded.rsplit(",", 1)[-1].strip()
    try:
        return str(ipaddress.ip_address(last))
    except ValueError:
        return remote


def wants_json(request: HttpRequest) -> bool:
    """True for fetch()/API callers, False for browsers navigating."""
    accept = request.headers.get("Accept", "")
    return "application/json" in accept and "text/html" not in accept


def require_token(setting: str) -> Callable[[View], View]:
    """Machine endpoints: `Authorization: Bearer <token>`, the token read from
    `settings.<setting>`. 401 without credentials, 403 with wrong ones, 403
    for everyone while the setting is empty. Exempt from CSRF: no cookie is
    involved, so there is nothing to forge."""

    def decorate(view: View) -> View:
        @csrf_exempt
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            expected = getattr(settings, setting, "")
            scheme, _, given = request.headers.get("Authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not given:
                response = json_error(401, "Send Authorization: Bearer <token>.")
                response["WWW-Authenticate"] = "Bearer"
                return response
            if not expected:
                return json_error(403, f"This API is disabled: {setting} is not set.")
            if not hmac.compare_digest(given.strip().encode(), expected.encode()):
                return json_error(403, "Wrong token.")
            return view(request, *args, **kwargs)

        return wrapped

    return decorate
