"""docs/configuration.md names every setting the library reads that is not
Django's or Celery's own: a setting added in code and not on the page fails."""

import importlib
import re
from pathlib import Path

from django.conf import global_settings

from webfarm.core.appsettings import AppSettings

ROOT = Path(__file__).resolve().parents[2]
READ = re.compile(r'(?:getattr\(settings, |require_token\()"([A-Z][A-Z0-9_]+)"|settings\.([A-Z][A-Z0-9_]+)')


def _read_by_the_library() -> set[str]:
    names = set()
    for path in (ROOT / "webfarm").rglob("*.py"):
        for found in READ.findall(path.read_text()):
            names.add(found[0] or found[1])
    return names


def test_every_setting_of_the_library_s_own_is_on_the_page():
    confs = [
        importlib.import_module(f"webfarm.{path.parent.name}.conf") for path in ROOT.glob("webfarm/*/conf.py")
    ]
    apps = {
        conf.get_config.setting
        for conf in confs
        if isinstance(getattr(conf, "get_config", None), AppSettings)
    }
    django = set(dir(global_settings)) | {"TASKS"}  # TASKS: Django 6's, and the backport's on 5.2
    own = {name for name in _read_by_the_library() - django - apps if not name.startswith("CELERY_")}
    assert own >= {"ACTIVITY_LOG_FILE", "QUEUE_API_TOKEN", "SESSION_CACHE_TTL", "TRUSTED_PROXIES"}
    page = (ROOT / "docs" / "configuration.md").read_text()
    assert [name for name in sorted(own) if f"| `{name}` |" not in page] == []
