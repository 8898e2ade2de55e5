"""The imports app's settings: DEFAULTS overlaid by settings.IMPORTS."""

from typing import Any

from core.appsettings import AppSettings

# The job type's name (imports/jobs.py), which the pages look jobs up by.
KIND = "customer-import"

DEFAULTS: dict[str, Any] = {
    # The largest file a user may upload (bytes): it is kept in the database
    # until the import has run, so any worker can read it.
    "MAX_UPLOAD_BYTES": 5 * 1024 * 1024,
    # The most rows one file may hold.
    "MAX_ROWS": 50_000,
    # Rows checked per database query (existing e-mail addresses).
    "CHUNK_ROWS": 500,
    # Days an upload and its rejected rows are kept (as long as its job); 0: for good.
    "KEEP_DAYS": 30,
}

get_config = AppSettings("IMPORTS", DEFAULTS)
