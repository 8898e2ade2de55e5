"""The imports app's settings, overlaid by settings.IMPORTS."""

from webfarm.core.appsettings import AppSettings, Setting

# The job type's name (demofarm/imports/jobs.py), which the pages look jobs up by.
KIND = "customer-import"

get_config = AppSettings(
    "IMPORTS",
    [
        # It is kept in the database until the import has run, so any worker can read it.
        Setting(
            "MAX_UPLOAD_BYTES",
            5 * 1024 * 1024,
            "the largest CSV file a customer import takes, in bytes",
        ),
        Setting("MAX_ROWS", 50_000, "the most rows one file may hold"),
        Setting("CHUNK_ROWS", 500, "rows checked per database query (existing e-mail addresses)"),
        Setting(
            "KEEP_DAYS",
            30,
            "days an upload and its rejected rows are kept before beat deletes them; `0` keeps them",
        ),
    ],
)
