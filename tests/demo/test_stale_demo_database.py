"""`manage.py stale_demo_database`, which `make setup` runs before `migrate`:
a demo database from before webfarm 1.0 is made anew, and it says so; a
current one is left as it is."""

import sqlite3
from pathlib import Path

from django.db.migrations.loader import MigrationLoader

from tests.harness import processes


def _database(path: Path, migrations: list[tuple[str, str]]) -> None:
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE django_migrations (id integer primary key, app text, name text, applied text)"
        )
        db.executemany(
            "INSERT INTO django_migrations (app, name, applied) VALUES (?, ?, '2026-01-01')", migrations
        )
        db.execute("CREATE TABLE kept (x integer)")
    db.close()


def _run(path: Path) -> str:
    env = {**processes.with_secret_key(None), "DATABASE_URL": f"sqlite:///{path}"}
    return processes.manage(env, "stale_demo_database")


def test_a_database_with_migrations_from_before_1_0_is_removed_and_it_says_so(tmp_path):
    path = tmp_path / "db.sqlite3"
    _database(
        path, [("auth", "0001_initial"), ("webfarm_core", "0001_revocation"), ("progress", "0001_initial")]
    )
    said = _run(path)
    assert not path.exists()
    assert f"{path} was made before webfarm 1.0" in said
    assert "progress.0001_initial, webfarm_core.0001_revocation" in said


def test_a_database_of_today_s_migrations_is_kept(tmp_path):
    path = tmp_path / "db.sqlite3"
    _database(path, sorted(MigrationLoader(None, ignore_no_migrations=True).disk_migrations))
    assert _run(path) == ""
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM kept").fetchone() == (0,)
    db.close()


def test_a_new_database_is_left_to_migrate(tmp_path):
    path = tmp_path / "db.sqlite3"
    assert _run(path) == ""
