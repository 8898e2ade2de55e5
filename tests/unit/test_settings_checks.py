"""A project that gets one of the apps' settings dicts wrong hears so from
`manage.py check`: the setting as it wrote it, what is wrong, and the fix,
never a traceback and never a silent default."""

import pytest
from django.core import checks

from tests.harness.processes import free_port
from webfarm.core.conf import get_config as memcached_config
from webfarm.queues.conf import get_config as queues_config


def _ours() -> list[checks.CheckMessage]:
    return [m for m in checks.run_checks(databases=[]) if m.id and m.id.startswith("webfarm")]


def _by_id(messages: list[checks.CheckMessage]) -> dict[str, checks.CheckMessage]:
    return {m.id: m for m in messages}


def test_a_misspelt_key_is_named_with_the_one_it_likely_meant(settings):
    servers = settings.MEMCACHED["SERVERS"]
    settings.MEMCACHED = {"SERVER": servers}
    found = _by_id(_ours())
    message = found["webfarm_core.E101"]
    assert message.level == checks.ERROR
    assert "MEMCACHED['SERVER'] is no setting" in message.msg
    assert message.hint == 'did you mean MEMCACHED["SERVERS"]?'


@pytest.mark.parametrize(
    ("setting", "value", "key", "app"),
    [
        ("PROGRESS", {"HEARTBEAT_INTERVALL": 5.0}, "HEARTBEAT_INTERVAL", "webfarm_progress"),
        ("QUEUES", {"VISIBILITY": 60}, "VISIBILITY_TIMEOUT", "webfarm_queues"),
        ("LIMITS", {"DOWNLOAD_PER_USER": 1}, "DOWNLOADS_PER_USER", "webfarm_limits"),
        ("DASHBOARD", {"HOUR": 24}, "HOURS", "webfarm_dashboard"),
        ("ACTIVITY", {"POLL_SAMPLES": 0.5}, "POLL_SAMPLE", "webfarm_activity"),
    ],
)
def test_every_app_names_its_unknown_keys(settings, setting, value, key, app):
    setattr(settings, setting, value)
    message = _by_id(_ours())[f"{app}.E101"]
    assert message.hint == f'did you mean {setting}["{key}"]?'


def test_a_key_like_none_lists_the_keys_there_are(settings):
    settings.ACTIVITY = {"COLOUR": "blue"}
    message = _by_id(_ours())["webfarm_activity.E101"]
    assert message.hint.startswith("ACTIVITY takes POLL_SAMPLE")


def test_a_server_list_written_as_a_string_is_named_as_such_and_nothing_else(settings):
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": "127.0.0.1:11211"}
    found = _by_id(_ours())
    message = found["webfarm_core.E102"]
    assert message.msg == "MEMCACHED[\"SERVERS\"] is '127.0.0.1:11211': it takes a list of strings"
    assert message.hint == "for example MEMCACHED[\"SERVERS\"] = ['127.0.0.1:11211'] (the default)"
    # Not also "server '1' is not host:port": one mistake, one message.
    assert "webfarm_core.E001" not in found


@pytest.mark.parametrize(
    ("setting", "value", "wanted"),
    [
        ("PROGRESS", {"RECORD_TTL": "86400"}, "a whole number"),
        ("PROGRESS", {"POLL_GATE": 1}, "True or False"),
        ("QUEUES", {"VISIBILITY_TIMEOUT": None}, "a whole number"),
        ("QUEUES", {"MIRRORS": "a:1,b:2"}, "a list of strings"),
        ("LIMITS", {"PAUSE": "0.1"}, "a number"),
        ("MEMCACHED", {"OPTIONS": ["max_pool_size"]}, "a dict"),
    ],
)
def test_a_value_of_the_wrong_kind_is_an_error_never_a_traceback(settings, setting, value, wanted):
    setattr(settings, setting, {**getattr(settings, setting, {}), **value})
    (key,) = value
    errors = [m for m in _ours() if m.id.endswith(".E102")]
    assert [m.msg for m in errors] == [f'{setting}["{key}"] is {value[key]!r}: it takes {wanted}']


def test_a_float_setting_takes_a_whole_number_and_the_right_values_say_nothing(settings):
    settings.LIMITS = {"PAUSE": 1}
    settings.QUEUES = {"MIRRORS": ("127.0.0.1:1", "127.0.0.1:2")}
    assert not [m for m in _ours() if m.id.endswith((".E100", ".E101", ".E102"))]


def test_a_settings_dict_that_is_no_dict_is_named_and_the_defaults_hold(settings):
    settings.QUEUES = ["VISIBILITY_TIMEOUT", 60]
    message = _by_id(_ours())["webfarm_queues.E100"]
    assert message.msg == "QUEUES is a list, not a dict of settings"
    assert message.hint.startswith('write it as QUEUES = {"')
    assert queues_config()["VISIBILITY_TIMEOUT"] == 60  # the default, not a crash


def test_the_memcached_client_reads_the_same_settings_the_check_reads(settings):
    settings.MEMCACHED = {**settings.MEMCACHED, "TIMEOUT": 1}
    assert memcached_config()["TIMEOUT"] == 1 and not [m for m in _ours() if m.id.endswith(".E102")]


def test_a_server_that_does_not_answer_is_named_and_one_that_does_is_not(settings, memcached_server):
    silent = f"127.0.0.1:{free_port()}"
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [memcached_server, silent]}
    warned = [m for m in _ours() if m.id == "webfarm_core.W001"]
    assert len(warned) == 1 and warned[0].level == checks.WARNING
    assert warned[0].msg.startswith(f"memcached at {silent} does not answer")
    assert "no job can start" in warned[0].msg and 'MEMCACHED["SERVERS"]' in warned[0].hint
