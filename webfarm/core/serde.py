"""The serializer Django's cache uses on memcached: JSON and plain values, never pickle.

memcached has no authentication, so anyone who can reach it can plant a value
with pymemcache's pickle flag under a key a web node reads (a session, say).
This serde never unpickles: a value with a flag it did not write reads as a
miss, and is counted (stats: `memcached_refused{family}`) so an operator sees
someone is writing where they should not.
"""

import json
from typing import Any

from webfarm.core.tampering import refused

# pymemcache's own flags for the plain types, so values stay readable by other
# clients; JSON gets a flag pymemcache does not use. Pickle (1) is never read.
FLAG_BYTES = 0
FLAG_PICKLE = 1
FLAG_INTEGER = 2
FLAG_TEXT = 16
FLAG_JSON = 64


class JsonSerde:
    """pymemcache serde: bytes, str, int and JSON-able values both ways."""

    def serialize(self, key: bytes | str, value: Any) -> tuple[bytes, int]:
        if isinstance(value, bytes):
            return value, FLAG_BYTES
        if isinstance(value, str):
            return value.encode(), FLAG_TEXT
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value).encode(), FLAG_INTEGER
        # TypeError for anything JSON cannot hold: the caller learns at once,
        # instead of a pickle being written for a reader to run.
        return json.dumps(value, separators=(",", ":")).encode(), FLAG_JSON

    def deserialize(self, key: bytes | str, value: bytes, flags: int) -> Any:
        try:
            if flags == FLAG_BYTES:
                return value
            if flags == FLAG_TEXT:
                return value.decode()
            if flags == FLAG_INTEGER:
                return int(value)
            if flags == FLAG_JSON:
                return json.loads(value)
        except (ValueError, RecursionError):
            pass
        refused("dj", key, f"flags {flags}")
        return None
