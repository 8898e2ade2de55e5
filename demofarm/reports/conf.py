"""The reports app's settings, overlaid by settings.REPORTS."""

from webfarm.core.appsettings import AppSettings, Setting

get_config = AppSettings(
    "REPORTS",
    [
        Setting(
            "TYPES",
            [
                "demofarm.reports.definitions.sales_by_region.SalesByRegion",
                "demofarm.reports.definitions.top_customers.TopCustomers",
                "demofarm.reports.definitions.return_rates.ReturnRates",
            ],
            "the report types users can start: dotted paths of `Report` subclasses",
        ),
        Setting("PER_USER", 2, "reports queued or running at once, farm-wide, per user"),
        Setting("PER_KIND", 4, "reports queued or running at once, farm-wide, per report type"),
        Setting(
            "TIME_LIMITS",
            {},
            "soft time limits in seconds per report type, over the type's own: "
            "`sales-by-region=600,top-customers=300` (default 1800)",
        ),
        # A report never holds more than this many rows.
        Setting(
            "CHUNK_ROWS",
            2000,
            "order lines per chunk of a report's scan: two queries (the lines, then their orders) and a "
            "progress update",
        ),
        Setting(
            "CHUNK_PAUSE",
            0.0,
            "seconds a report's scan waits after each chunk, as it would on a distant database: a small "
            "dataset then makes reports as long as a large one's, without the work (the tests' farms)",
        ),
        Setting(
            "PART_ROWS",
            100_000,
            "the sales report runs in parts of about this many order lines (by id), at once on any workers; "
            "`0` runs it whole ([docs/jobs.md](../docs/jobs.md#one-job-many-workers))",
        ),
        Setting("MAX_PARTS", 16, "the most parts a sales report is split in"),
        Setting("RESULT_CHUNK_BYTES", 512 * 1024, "bytes per stored result chunk (database rows)"),
    ],
)
