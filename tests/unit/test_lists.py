"""webfarm.core.lists on a real memcached: what someone else wrote into a list
cannot hide the names appended after it."""

import pickle

from webfarm.core.client import get_client
from webfarm.core.lists import add_member, members


def _named(name: str) -> bool:
    return name.isidentifier()


def test_names_are_listed_once_each_and_sorted():
    client = get_client()
    for name in ["b", "a", "c"]:
        add_member(client, "lists-test:plain", name)
    assert members(client, "lists-test:plain", _named) == ["a", "b", "c"]


def test_a_planted_value_without_a_last_newline_hides_no_name_appended_after_it():
    client = get_client()
    client.set("lists-test:planted", pickle.dumps({"run": "code"}))  # ends with b".", no newline
    add_member(client, "lists-test:planted", "first")
    add_member(client, "lists-test:planted", "second")
    assert members(client, "lists-test:planted", _named) == ["first", "second"]
