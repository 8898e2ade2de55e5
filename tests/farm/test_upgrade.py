"""A database made before an app was relabelled keeps its data through
`manage.py migrate` (webfarm.core.oldlabels).

The dumps in tests/farm/data:
- before_webfarm_labels: made by the code of commit 5715d99 (the apps still
  labelled `core`, `polls`, ...): `migrate`, then a user with a permission
  on a poll model, a group with one on an upload, a poll with a vote, an
  admin log entry for the poll, a revocation, a counter's watermark and
  sample, an upload with a rejected row.
- before_webfarm_progress: made by the code of commit 21eba2a (progress a
  top-level app labelled `progress`): `migrate`, then a user with the
  permission to view jobs, a group with the one to change them, a finished
  job with a part and a result file, an admin log entry for the job."""

import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.harness import processes

pytestmark = pytest.mark.farm

DATA = Path(__file__).with_name("data")
OLD_LABELS = ("core", "stats", "polls", "imports")

# Run in the upgraded site, printed as one line each: what a user of the site would see.
LOOK = """
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from webfarm.core.models import Revocation
from demofarm.imports.models import RejectedRow
from demofarm.polls.models import Poll, Vote
from webfarm.stats.models import CounterSample, CounterWatermark
alice = User.objects.get(username="alice")
print("perms", alice.has_perm("webfarm_polls.add_vote"), alice.has_perm("webfarm_imports.view_upload"))
print("poll", Poll.objects.get().question, Vote.objects.get().choice.text)
print("logged", LogEntry.objects.get().get_edited_object().question)
print("rows", Revocation.objects.get().key, CounterWatermark.objects.get().raw,
      CounterSample.objects.get().value, RejectedRow.objects.get().upload.name)
print("labels", ",".join(sorted(set(ContentType.objects.values_list("app_label", flat=True)))))
print("tables", ",".join(sorted(connection.introspection.table_names())))
"""


def _manage(database_url: str, *args: str) -> str:
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "demofarm.settings"}
    done = subprocess.run(
        [str(processes.BIN / "python"), "manage.py", *args],
        cwd=processes.ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


LOOK_PROGRESS = """
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Group, User
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from webfarm.progress.models import Job
alice = User.objects.get(username="alice")
job = Job.objects.get()
print("perms", alice.has_perm("webfarm_progress.view_job"), Group.objects.get().permissions.get().codename)
print("job", job.owner.username, job.value["total"], job.parts.get().result["rows"], job.files.get().name)
print("logged", LogEntry.objects.get().get_edited_object().title.replace(" ", "_"))
print("labels", ",".join(sorted(set(ContentType.objects.values_list("app_label", flat=True)))))
print("tables", ",".join(sorted(connection.introspection.table_names())))
"""


def _upgrade_and_look(
    database_url: str, look: str = LOOK, adopted: str = "core -> webfarm_core"
) -> dict[str, str]:
    migrated = _manage(database_url, "migrate", "--no-input")
    assert f"Adopted the tables and migrations of the old app labels: {adopted}" in migrated
    # Done once: a second run finds nothing to adopt, nothing to apply, no model unmigrated.
    again = _manage(database_url, "migrate", "--no-input")
    assert "Adopted" not in again and "No migrations to apply" in again
    _manage(database_url, "makemigrations", "--check", "--dry-run")
    looked = _manage(database_url, "shell", "--no-imports", "-c", look)
    return dict(line.split(" ", 1) for line in looked.splitlines() if " " in line)


def _assert_kept(seen: dict[str, str]) -> None:
    assert seen["perms"] == "True True"
    assert seen["poll"] == "Which report? Sales"
    assert seen["logged"] == "Which report?"
    assert seen["rows"] == "user:1 41 41 orders.csv"
    labels = seen["labels"].split(",")
    assert {"webfarm_core", "webfarm_polls", "webfarm_imports", "webfarm_stats"} <= set(labels)
    tables = seen["tables"].split(",")
    assert "webfarm_polls_vote" in tables and "webfarm_core_revocation" in tables
    for old in OLD_LABELS:
        assert old not in labels
        assert not [table for table in tables if table.startswith(f"{old}_")]


def _load(url: str, dump: Path) -> None:
    psql = processes.postgres_bin() / "psql"
    loaded = subprocess.run(
        [str(psql), "--dbname", url, "-v", "ON_ERROR_STOP=1", "-q", "-f", str(dump)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert loaded.returncode == 0, loaded.stderr


def test_a_sqlite_database_from_before_keeps_its_data(tmp_path):
    path = tmp_path / "before.sqlite3"
    with sqlite3.connect(path) as db:
        db.executescript((DATA / "before_webfarm_labels.sqlite.sql").read_text())
    _assert_kept(_upgrade_and_look(f"sqlite:///{path}"))


def test_a_postgresql_database_from_before_keeps_its_data_and_sequences():
    with processes.postgres_database("before_labels") as url:
        _load(url, DATA / "before_webfarm_labels.postgresql.sql")
        _assert_kept(_upgrade_and_look(url))
        # New rows still get ids, from a sequence now named for the new table.
        added = _manage(
            url,
            "shell",
            "--no-imports",
            "-c",
            (
                "from django.db import connection; from demofarm.polls.models import Poll; "
                "print(Poll.objects.create(question='After?').pk); "
                "c = connection.cursor(); "
                "c.execute(\"select pg_get_serial_sequence('webfarm_polls_poll', 'id')\"); "
                "print(c.fetchone()[0])"
            ),
        )
        assert added.split() == ["2", "public.webfarm_polls_poll_id_seq"]


def _assert_jobs_kept(seen: dict[str, str]) -> None:
    assert seen["perms"] == "True change_job"
    assert seen["job"] == "alice 41 41 sales.csv"
    assert seen["logged"] == "Sales_before_the_move"
    assert "webfarm_progress" in seen["labels"].split(",") and "progress" not in seen["labels"].split(",")
    tables = seen["tables"].split(",")
    assert {"webfarm_progress_job", "webfarm_progress_jobpart", "reports_resultfile"} <= set(tables)
    assert not [table for table in tables if table.startswith("progress_")]


def test_a_sqlite_database_of_progress_before_it_moved_into_webfarm_keeps_its_jobs(tmp_path):
    path = tmp_path / "before.sqlite3"
    with sqlite3.connect(path) as db:
        db.executescript((DATA / "before_webfarm_progress.sqlite.sql").read_text())
    seen = _upgrade_and_look(f"sqlite:///{path}", LOOK_PROGRESS, "progress -> webfarm_progress")
    _assert_jobs_kept(seen)


def test_a_postgresql_database_of_progress_before_it_moved_into_webfarm_keeps_its_jobs():
    with processes.postgres_database("before_progress") as url:
        _load(url, DATA / "before_webfarm_progress.postgresql.sql")
        _assert_jobs_kept(_upgrade_and_look(url, LOOK_PROGRESS, "progress -> webfarm_progress"))
        # A new part row gets an id from the sequence now named for the new table.
        added = _manage(
            url,
            "shell",
            "--no-imports",
            "-c",
            (
                "from django.db import connection; from webfarm.progress.models import Job, JobPart; "
                "print(JobPart.objects.create(job=Job.objects.get(), index=1).pk); "
                "c = connection.cursor(); "
                "c.execute(\"select pg_get_serial_sequence('webfarm_progress_jobpart', 'id')\"); "
                "print(c.fetchone()[0])"
            ),
        )
        assert added.split() == ["2", "public.webfarm_progress_jobpart_id_seq"]


def test_a_label_that_is_someone_elses_is_left_alone(tmp_path):
    """A project's own `polls` app (Django's tutorial) recorded 0001_initial
    under the label `polls`: not ours, since its tables are not."""
    path = tmp_path / "theirs.sqlite3"
    with sqlite3.connect(path) as db:
        db.executescript(
            'CREATE TABLE "django_migrations" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, '
            '"app" varchar(255) NOT NULL, "name" varchar(255) NOT NULL, "applied" datetime NOT NULL);'
            "INSERT INTO django_migrations (app, name, applied) "
            "VALUES ('polls', '0001_initial', '2026-01-01');"
            'CREATE TABLE "polls_question" ("id" integer NOT NULL PRIMARY KEY, "question_text" varchar(200));'
            'CREATE TABLE "polls_choice" ("id" integer NOT NULL PRIMARY KEY, "choice_text" varchar(200));'
        )
    migrated = _manage(f"sqlite:///{path}", "migrate", "--no-input")
    assert "Adopted" not in migrated
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM django_migrations WHERE app = 'polls'").fetchone() == (1,)
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"polls_question", "polls_choice", "webfarm_polls_poll"} <= tables
