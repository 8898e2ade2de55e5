from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from webfarm.core.client import parse_servers
from webfarm.queues.conf import get_config


@checks.register()
def check_queue_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    if not get_config.well_typed():
        return []  # check_settings_dict says which value is of the wrong kind
    config = get_config()
    errors: list[checks.CheckMessage] = []
    mirrors = config["MIRRORS"]
    if mirrors:
        try:
            if len(parse_servers(mirrors)) != 2:
                raise ImproperlyConfigured(f'QUEUES["MIRRORS"] names {len(mirrors)} servers, not 2')
        except ImproperlyConfigured as exc:
            errors.append(checks.Error(str(exc), id="webfarm_queues.E001"))
    if not 0 < config["VISIBILITY_TIMEOUT"] <= 30 * 24 * 3600:
        errors.append(
            checks.Error('QUEUES["VISIBILITY_TIMEOUT"] must be 1 s to 30 days', id="webfarm_queues.E002")
        )
    return errors


@checks.register()
def check_settings_dict(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """QUEUES: unknown keys, wrong types."""
    return get_config.check_messages("webfarm_queues")
