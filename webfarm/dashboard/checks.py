"""System checks of the dashboard app."""

from typing import Any

from django.core import checks

from webfarm.dashboard.conf import get_config


@checks.register()
def check_settings_dict(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """DASHBOARD: unknown keys, wrong types."""
    return get_config.check_messages("webfarm_dashboard")
