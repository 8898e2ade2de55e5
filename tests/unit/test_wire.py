"""memcached's wire is written in one place, webfarm.core.client: no other
module of the library or the site spells a protocol verb, status or line
ending (the client's helpers and MetaReply's properties say them), and a
JSON object sealed in place is sealed by webfarm.core.seal alone."""

import ast
import re
from pathlib import Path

import pytest

from webfarm.core.client import MetaReply, delete_quietly_line, get_line, meta_set, set_line
from webfarm.core.seal import seal_json, unseal_json

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "webfarm" / "core" / "client"
# A bytes literal that is a command or an answer of memcached's protocol.
PROTOCOL = re.compile(
    rb"^(mg|ms|md|ma|mn|me|HD|VA|EN|NF|NS|EX|MN|STORED|NOT_STORED|EXISTS|NOT_FOUND|DELETED|END|"
    rb"SERVER_ERROR|CLIENT_ERROR|add|append|prepend|set|cas|get|gets|incr|decr|delete|touch)( |\r|$)"
    rb"|\r\n"
)


def _protocol_literals(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{path}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, bytes) and PROTOCOL.search(node.value)
    ]


def test_no_module_outside_the_client_writes_memcacheds_wire():
    modules = [
        path
        for package in ("webfarm", "demofarm")
        for path in (ROOT / package).rglob("*.py")
        if CLIENT not in path.parents and "migrations" not in path.parts
    ]
    assert len(modules) > 100
    assert [literal for module in modules for literal in _protocol_literals(module)] == []


def test_the_check_sees_a_literal_it_must_refuse(tmp_path):
    stray = tmp_path / "stray.py"
    stray.write_text('LINE = b"mg %s v\\r\\n"\nOK = reply.status == b"HD"\nNAME = b"stale"\n')
    assert len(_protocol_literals(stray)) == 2


def test_the_helpers_spell_what_memcached_reads():
    assert get_line(b"k", b"v c") == b"mg k v c\r\n"
    assert set_line(b"k", b"T5 ME", b"abc") == b"ms k 3 T5 ME\r\nabc\r\n"
    assert meta_set(b"k", "T5", value=b"ab") == b"ms k 2 T5\r\nab\r\n"
    assert delete_quietly_line(b"k") == b"delete k noreply\r\n"
    assert MetaReply(b"HD").done and MetaReply(b"VA", value=b"1").hit and MetaReply(b"EX").changed
    assert MetaReply(b"EN", b"W").won and not MetaReply(b"VA").won


@pytest.mark.parametrize(
    "mangle",
    [
        lambda raw: raw.replace(b'"percent":50', b'"percent":99'),  # the body changed
        lambda raw: raw[:-5] + b'0000"}',  # the MAC changed
        lambda raw: raw[: raw.rindex(b',"seal"')] + b"}",  # no seal at all
    ],
)
def test_a_json_object_sealed_in_place_is_refused_when_changed(settings, mangle):
    body = b'{"state":"running","percent":50}'
    raw = seal_json("pub:j1.t1", body)
    assert raw.startswith(b'{"state":"running","percent":50,"seal":"')
    assert unseal_json("pub:j1.t1", raw) == body
    assert unseal_json("pub:j2.t1", raw) is None  # another key's
    assert unseal_json("pub:j1.t1", mangle(raw)) is None
