"""What a message in the vote queue is, checked by the flusher before it
touches the database."""

import ipaddress
import math
import re
from typing import Any

VOTE_ID_RE = re.compile(r"[A-Za-z0-9_-]{22}")
VOTER_RE = re.compile(r"u:[1-9][0-9]{0,18}|a:[A-Za-z0-9_-]{22}")
EPOCH_RE = re.compile(r"[0-9a-f]{8}")
MAX_ID = 2**63 - 1
# A vote cast after 2286 is no vote (and overflows datetime).
LATEST = 1e10


class BadVote(ValueError):
    """Not a vote this farm queued; the reason says why."""


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_ID


def check_vote(data: Any) -> dict[str, Any]:
    """The vote, if `data` is one (services.new_vote's shape), else BadVote."""
    if not isinstance(data, dict):
        raise BadVote(f"not an object but {type(data).__name__}")
    if not isinstance(data.get("id"), str) or not VOTE_ID_RE.fullmatch(data["id"]):
        raise BadVote("bad vote id")
    for name in ("poll", "choice"):
        if not _positive(data.get(name)):
            raise BadVote(f"{name} is not an id")
    if data.get("user") is not None and not _positive(data["user"]):
        raise BadVote("user is not an id")
    if not isinstance(data.get("voter"), str) or not VOTER_RE.fullmatch(data["voter"]):
        raise BadVote("bad voter")
    address = data.get("address")
    if address is not None:
        try:
            ipaddress.ip_address(address)
        except ValueError:
            raise BadVote("bad address") from None
    at = data.get("at")
    number = isinstance(at, int | float) and not isinstance(at, bool)
    if not number or not math.isfinite(at) or not 0 < at < LATEST:
        raise BadVote("bad time")
    counted_in = data.get("counted_in")
    if counted_in is not None and not (isinstance(counted_in, str) and EPOCH_RE.fullmatch(counted_in)):
        raise BadVote("bad epoch")
    return data
