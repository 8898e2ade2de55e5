"""A database made before an app was relabelled keeps its data.

The apps were once top-level packages labelled `core`, `polls`, `progress`,
...: names that collide in anyone else's project. Their labels are now
`webfarm_core`, `webfarm_progress`, ... and so are their tables' prefixes.
Django would see a relabelled app's migrations as never applied and create
empty tables beside the old ones, so `manage.py migrate` (webfarm.core's own
command) first adopts what the old labels left: it renames their tables, then
relabels their rows in `django_migrations` and `django_content_type` (the
permissions, groups and admin log that point at those content types follow).

An app names the labels it had in its AppConfig's `old_labels`, so a site's
own apps can be relabelled the same way.

It adopts an old label only when nothing could be someone else's: no
installed app has that label, every migration recorded under it is one of
ours, every table its models had exists (a model added since had none) and
none of the new ones does yet.
"""

from typing import Any

from django.apps import apps
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.operations import CreateModel
from django.db.migrations.recorder import MigrationRecorder


def renamed() -> dict[str, str]:
    """Old label -> the label its app has now, for every installed app."""
    return {
        old: config.label for config in apps.get_app_configs() for old in getattr(config, "old_labels", ())
    }


def adopt_old_labels(database: str = "default") -> list[tuple[str, str]]:
    """(old, new) for each old label adopted in `database` (none once done: it is safe to run every time)."""
    connection = connections[database]
    recorder = MigrationRecorder(connection)
    if not recorder.has_table():
        return []
    applied = set(recorder.applied_migrations())
    ours = MigrationLoader(None, ignore_no_migrations=True).disk_migrations
    tables = set(connection.introspection.table_names())
    adopted = []
    for old, new in renamed().items():
        # A model added since the old label was left has no old table: its
        # migration, not yet applied, makes it.
        recorded = {name for app, name in applied if app == old}
        later = _made_by(new, [m for (app, name), m in ours.items() if app == new and name not in recorded])
        renames = [(before, after) for before, after in _table_renames(old, new) if after not in later]
        if (
            not recorded
            or any(config.label == old for config in apps.get_app_configs())
            or any(app == new for app, _ in applied)
            or not recorded <= {name for app, name in ours if app == new}
            or not all(before in tables and after not in tables for before, after in renames)
        ):
            continue
        _adopt(connection, old, new, renames)
        adopted.append((old, new))
    return adopted


def _made_by(label: str, migrations: list[Any]) -> set[str]:
    """The tables these migrations of app `label` create."""
    made = set()
    for migration in migrations:
        for operation in migration.operations:
            if isinstance(operation, CreateModel):
                made.add(apps.get_model(label, operation.name)._meta.db_table)
    return made


def _table_renames(old: str, new: str) -> list[tuple[str, str]]:
    """(old table, new table) for each of the app's tables that took its label's name."""
    renames = []
    for model in apps.get_app_config(new).get_models(include_auto_created=True):
        table = model._meta.db_table
        if table.startswith(f"{new}_"):
            renames.append((f"{old}_{table.removeprefix(f'{new}_')}", table))
    return renames


def _adopt(connection: BaseDatabaseWrapper, old: str, new: str, renames: list[tuple[str, str]]) -> None:
    # One transaction where the database can roll DDL back (SQLite and
    # PostgreSQL both can): a failure leaves the old labels whole.
    with connection.schema_editor() as editor:
        for before, after in renames:
            editor.execute(f"ALTER TABLE {editor.quote_name(before)} RENAME TO {editor.quote_name(after)}")
            if connection.vendor == "postgresql":
                _rename_sequences(connection, before, after)
        with connection.cursor() as cursor:
            cursor.execute("UPDATE django_migrations SET app = %s WHERE app = %s", [new, old])
            if "django_content_type" in connection.introspection.table_names(cursor):
                cursor.execute(
                    "UPDATE django_content_type SET app_label = %s WHERE app_label = %s", [new, old]
                )


def _rename_sequences(connection: BaseDatabaseWrapper, before: str, after: str) -> None:
    """PostgreSQL keeps an identity column's sequence name through a table
    rename; a later table of the old name would then fail on it."""
    with connection.cursor() as cursor:
        for sequence in connection.introspection.get_sequences(cursor, after):
            name = sequence["name"]
            if name.startswith(f"{before}_"):
                new_name = f"{after}_{name.removeprefix(f'{before}_')}"
                quote = connection.ops.quote_name
                cursor.execute(f"ALTER SEQUENCE {quote(name)} RENAME TO {quote(new_name)}")
