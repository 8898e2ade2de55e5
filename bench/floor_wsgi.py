"""The floor of any Python poll under gunicorn: a bare WSGI app that reads
one memcached key with pymemcache and sends it. No Django, no checks: what a
poll costs here is what the server and one round trip cost."""

import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

from pymemcache.client.base import Client

_local = threading.local()
HOST, PORT = os.environ["MEMCACHED_SERVERS"].split(",")[0].rsplit(":", 1)
KEY = f"{os.environ.get('MEMCACHED_NAMESPACE', 'webfarm')}:bench:bare"


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    client = getattr(_local, "client", None)
    if client is None:
        client = _local.client = Client((HOST, int(PORT)))
    body = client.get(KEY) or b""
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
