"""`make setup` runs this before `migrate`: a demo database that a checkout
from before webfarm 1.0 made has migration histories that 1.0 squashed or
relabelled, which `migrate` cannot carry on from. It held demo data only, so
it is made anew, and the command says so."""

from pathlib import Path
from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError
from django.db import connections
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

# The packages whose migrations 1.0 rewrote: the library's and the demo's.
OURS = ("webfarm.", "demofarm.")


def stale_migrations(database: str = "default") -> list[str]:
    """`app.name` for each migration recorded in `database` that no installed
    app of ours has on disk, or whose app is not installed at all."""
    recorder = MigrationRecorder(connections[database])
    if not recorder.has_table():
        return []
    labels = {config.label: config.name for config in apps.get_app_configs()}
    on_disk = set(MigrationLoader(None, ignore_no_migrations=True).disk_migrations)
    return sorted(
        f"{app}.{name}"
        for app, name in recorder.applied_migrations()
        if app not in labels or (labels[app].startswith(OURS) and (app, name) not in on_disk)
    )


class Command(BaseCommand):
    help = "Remove the demo's SQLite database where a checkout from before webfarm 1.0 made it."

    def handle(self, *args: Any, **options: Any) -> None:
        connection = connections["default"]
        stale = stale_migrations()
        if not stale:
            return
        shown = ", ".join(stale[:3]) + (f" and {len(stale) - 3} more" if len(stale) > 3 else "")
        if connection.vendor != "sqlite":
            raise CommandError(
                f"the database {connection.settings_dict['NAME']} was made before webfarm 1.0 "
                f"(its migrations {shown} are gone): drop it and run `make setup` again"
            )
        path = Path(connection.settings_dict["NAME"])
        connection.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        self.stdout.write(
            f"{path} was made before webfarm 1.0 (its migrations {shown} are gone): "
            "removed it, and setup makes the demo database anew"
        )
