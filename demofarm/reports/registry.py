"""The report types users can start, by name: the classes REPORTS["TYPES"]
names by dotted path (demofarm/reports/conf.py), so a project adds its own in settings."""

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from demofarm.reports.conf import get_config
from demofarm.reports.definitions.base import Report

_loaded: tuple[object, dict[str, Report]] | None = None


def all_reports() -> dict[str, Report]:
    """name -> report, in the order of the setting; loaded once per setting."""
    global _loaded
    config = get_config()
    if _loaded is None or _loaded[0] is not config:
        reports: dict[str, Report] = {}
        for path in config["TYPES"]:
            cls = import_string(path)
            if not (isinstance(cls, type) and issubclass(cls, Report)):
                raise ImproperlyConfigured(f"REPORTS['TYPES']: {path} is not a Report subclass")
            report = cls()
            if report.name in reports:
                raise ImproperlyConfigured(f"REPORTS['TYPES']: two report types are named {report.name!r}")
            reports[report.name] = report
        _loaded = (config, reports)
    return _loaded[1]


def get_report(name: str) -> Report | None:
    return all_reports().get(name)
