"""The report types, as job types the progress app runs: those
REPORTS["TYPES"] names (demofarm/reports/registry.py), read on every lookup."""

from demofarm.reports.registry import all_reports
from webfarm.progress.api import register

register(lambda: all_reports().values())
