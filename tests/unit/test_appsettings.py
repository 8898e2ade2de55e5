"""webfarm.core.appsettings: defaults overlaid by the settings dict, merged once,
merged again (and its listeners told) when that setting changes."""

from webfarm.core.appsettings import AppSettings, Setting


def test_defaults_overlaid_cached_and_renewed_when_the_setting_changes(settings):
    changed: list[str] = []
    settings.EXAMPLE_APP = {"B": 20}
    config = AppSettings("EXAMPLE_APP", [Setting("A", 1, "a"), Setting("B", 2, "b")])
    config.when_changed(lambda: changed.append("x"))
    assert config() == {"A": 1, "B": 20}
    assert config() is config()  # merged once, not per call
    settings.EXAMPLE_APP = {"A": 10}
    assert config() == {"A": 10, "B": 2} and changed == ["x"]
    settings.OTHER_APP = {"A": 99}  # another app's setting changes nothing here
    assert config()["A"] == 10 and changed == ["x"]


def test_a_variable_is_named_for_its_setting_and_the_old_name_still_works(monkeypatch, settings):
    from demofarm.env import env_float, old_names_in_use
    from webfarm.core.checks import check_environment_names

    monkeypatch.setenv("QUEUE_HOLE_WAIT", "3.5")  # the name from before the rename
    assert env_float("QUEUES_HOLE_WAIT", 2.0) == 3.5
    assert old_names_in_use() == ["QUEUE_HOLE_WAIT"]
    settings.OLD_ENVIRONMENT_NAMES = old_names_in_use()
    (warning,) = check_environment_names()
    assert warning.id == "webfarm_core.W001" and "QUEUE_HOLE_WAIT" in warning.msg
    monkeypatch.setenv("QUEUES_HOLE_WAIT", "4")  # the new name wins
    assert env_float("QUEUES_HOLE_WAIT", 2.0) == 4.0 and old_names_in_use() == []
