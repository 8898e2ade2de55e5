"""JSON error responses shared by the machine-facing views."""

from django.http import HttpRequest, JsonResponse


def json_error(status: int, message: str, *, retry_after: int | None = None) -> JsonResponse:
    response = JsonResponse({"error": message}, status=status)
    response["Cache-Control"] = "no-store"
    if retry_after is not None:
        response["Retry-After"] = str(retry_after)
    return response


def wants_json(request: HttpRequest) -> bool:
    """True for fetch()/API callers, False for browsers navigating."""
    accept = request.headers.get("Accept", "")
    return "application/json" in accept and "text/html" not in accept
