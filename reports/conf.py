"""The reports app's settings: DEFAULTS overlaid by settings.REPORTS."""

from typing import Any

from core.appsettings import AppSettings

DEFAULTS: dict[str, Any] = {
    # The report types users can start: dotted paths of Report subclasses.
    "TYPES": [
        "reports.definitions.sales_by_region.SalesByRegion",
        "reports.definitions.top_customers.TopCustomers",
        "reports.definitions.return_rates.ReturnRates",
    ],
    # Seconds per report type, over the type's own time limit: {"sales-by-region": 600}.
    "TIME_LIMITS": {},
    # Orders read per query: a report never holds more than this many rows.
    "CHUNK_ROWS": 2000,
    # A sales report is split into parts of about this many order lines (by
    # id), that run at once on any workers, and at most MAX_PARTS of them.
    "PART_ROWS": 100_000,
    "MAX_PARTS": 16,
    # A result file is stored in database rows of at most this many bytes.
    "RESULT_CHUNK_BYTES": 512 * 1024,
}

get_config = AppSettings("REPORTS", DEFAULTS)
