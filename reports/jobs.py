"""The report types, as job types the progress app runs: those
REPORTS["TYPES"] names (reports/registry.py), read on every lookup."""

from progress.api import add_source
from reports.registry import all_reports

add_source(lambda: all_reports().values())
