"""System checks of the activity app."""

from typing import Any

from django.core import checks

from webfarm.activity.conf import get_config


@checks.register()
def check_settings_dict(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """ACTIVITY: unknown keys, wrong types."""
    return get_config.check_messages("webfarm_activity")
