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
