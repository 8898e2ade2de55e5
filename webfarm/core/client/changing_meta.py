"""Meta commands on a key that moves while the pool changes
(webfarm.core.client.changing): each is carried out as the ChangingRing's
operations, which keep the key's one home, and answered as memcached would
have answered the command. A batch's other keys still go out pipelined;
these cost a few round trips each, during a change only.

The flags the farm sends, and nothing else, are understood: mg v c N R, ms T
ME C c, ma D MD N J v, md C. A command with any other flag is refused (a
ValueError), so a new use is not silently carried out wrong.
"""

from typing import Any

from pymemcache.exceptions import MemcacheServerError

from webfarm.core.client.changing import OLD, ChangingRing, split_token
from webfarm.core.client.clients import client_of, server_of
from webfarm.core.client.protocol import MetaReply, meta_command

_UNDERSTOOD = {
    b"mg": frozenset("vcNR"),
    b"ms": frozenset("TMCc"),
    b"ma": frozenset("DMNJv"),
    b"md": frozenset("C"),
}


def _parse(verb: bytes, flags: tuple[str, ...]) -> dict[str, str]:
    parsed = {}
    for flag in flags:
        if flag[:1] not in _UNDERSTOOD[verb]:
            raise ValueError(f"{verb.decode()} flag {flag!r} has no meaning while the pool changes")
        parsed[flag[:1]] = flag[1:]
    return parsed


def derived(verb: bytes, flags: tuple[str, ...]) -> bool:
    """A read that recomputes on a miss (mg with N or R, webfarm.core.memo):
    its key is a cache of something else, kept where its key hashes on the
    old list until the NEW stage, as memo's own calls keep it (a miss costs
    a recomputation, never a wrong value)."""
    return verb == b"mg" and any(flag[:1] in ("N", "R") for flag in flags)


def run_moving(
    ring: ChangingRing, verb: bytes, key: str, flags: tuple[str, ...], value: bytes | None, *, errors: bool
) -> MetaReply:
    """One meta command on a moving key, as the ChangingRing's operations."""
    parsed = _parse(verb, flags)
    try:
        return _RUN[verb](ring, key, parsed, value)
    except MemcacheServerError as exc:
        if not errors:
            raise
        return MetaReply(b"SERVER_ERROR", value=str(exc).encode())


def _tokens(parsed: dict[str, str], token: bytes | None) -> bytes:
    return b"c" + token if "c" in parsed and token is not None else b""


def _get(ring: ChangingRing, key: str, parsed: dict[str, str], _: bytes | None) -> MetaReply:
    found, token = ring.gets(key)
    if found is None:
        return MetaReply(b"EN")
    if "v" in parsed:
        return MetaReply(b"VA", _tokens(parsed, token), found)
    return MetaReply(b"HD", _tokens(parsed, token))


def _set(ring: ChangingRing, key: str, parsed: dict[str, str], value: bytes | None) -> MetaReply:
    assert value is not None
    expire = int(parsed.get("T") or 0)
    if "C" in parsed:
        stored = ring.cas(key, value, parsed["C"].encode(), expire=expire)
        status = b"HD" if stored else b"NF" if stored is None else b"EX"
    elif parsed.get("M", "S") == "E":
        status = b"HD" if ring.add(key, value, expire=expire) else b"NS"
    elif parsed.get("M", "S") == "S":
        ring.set(key, value, expire=expire)
        status = b"HD"
    else:
        raise ValueError(f"ms mode {parsed['M']!r} has no meaning while the pool changes")
    token = ring.gets(key)[1] if status == b"HD" and "c" in parsed else None
    return MetaReply(status, _tokens(parsed, token))


def _arithmetic(ring: ChangingRing, key: str, parsed: dict[str, str], _: bytes | None) -> MetaReply:
    delta = int(parsed.get("D") or 1)
    verb = "decr" if parsed.get("M") in ("D", "-") else "incr"
    result = getattr(ring, verb)(key, delta)
    if result is None and "N" in parsed:
        initial = int(parsed.get("J") or 0)
        # memcached's N: a miss makes the item with J as it is, the delta not applied.
        if ring.add(key, b"%d" % initial, expire=int(parsed["N"] or 0)):
            result = initial
        else:
            result = getattr(ring, verb)(key, delta)
    if result is None:
        return MetaReply(b"NF")
    return MetaReply(b"VA", b"", b"%d" % int(result)) if "v" in parsed else MetaReply(b"HD")


def _delete(ring: ChangingRing, key: str, parsed: dict[str, str], _: bytes | None) -> MetaReply:
    if "C" not in parsed:
        return MetaReply(b"HD" if ring.delete(key) else b"NF")
    # At that CAS only: on the server whose token it is, where memcached
    # compares it in the same step as it deletes.
    cas, side = split_token(parsed["C"].encode())
    on = ring.old if side == OLD else ring.new
    reply = _on_server(on, key, b"md", (f"C{cas.decode()}",))
    if reply.done and side != OLD:
        # The old server's tombstone goes too: no reader brings back what it carries.
        ring.old.delete(key, noreply=False)
    return reply


def _on_server(ring: Any, key: str, verb: bytes, flags: tuple[str, ...]) -> MetaReply:
    client = client_of(server_of(key, ring), ring)
    return client.meta([meta_command(verb, client.wire_key(key), *flags)])[0]


_RUN = {b"mg": _get, b"ms": _set, b"ma": _arithmetic, b"md": _delete}
