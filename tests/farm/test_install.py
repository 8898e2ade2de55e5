"""The wheel `pip wheel .` builds gives another project the library: one
regular package, `webfarm`, with its apps' files and nothing of the demo
site, and a `django-admin startproject` site that adds the apps
(tests/harness/installed.py), with PyPI's `progress` installed beside them,
passes Django's checks and migrates, from the wheel alone.
tests/browser/test_installed_site.py runs such a site end to end."""

import email
import json
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.harness import installdoc, installed, processes

pytestmark = pytest.mark.farm

VERSION = tomllib.loads((processes.ROOT / "pyproject.toml").read_text())["project"]["version"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return installed.build_wheel(tmp_path_factory.mktemp("wheel"))


def test_the_wheel_holds_the_apps_with_their_files_and_nothing_of_the_site(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "webfarm/progress/api.py",
        "webfarm/progress/templates/webfarm_progress/widget.html",
        "webfarm/progress/static/webfarm_progress/progress.js",
        "webfarm/progress/migrations/0001_initial.py",
        "webfarm/djangotasks/backend.py",
        "webfarm/broker/transport.py",
        "webfarm/core/client/__init__.py",
        "webfarm/py.typed",
        "webfarm/dashboard/templates/webfarm_dashboard/index.html",
        "webfarm/dashboard/static/webfarm_dashboard/dashboard.js",
        "webfarm/limits/templates/webfarm_limits/busy.html",
    ):
        assert needed in names
    top = {name.split("/")[0] for name in names}
    assert top == {"webfarm", wheel.name.removesuffix("-py3-none-any.whl") + ".dist-info"}
    # A regular package, not a namespace: its own __init__.py.
    shipped = {name.split("/")[1] for name in names if name.startswith("webfarm/")}
    assert shipped == {
        "__init__.py",
        "py.typed",
        "urls.py",
        "core",
        "queues",
        "broker",
        "progress",
        "stats",
        "activity",
        "limits",
        "djangotasks",
        "dashboard",
    }


def test_the_wheel_says_its_version_licence_and_what_it_runs_on(wheel):
    archive = zipfile.ZipFile(wheel)
    info = f"webfarm-{VERSION}.dist-info"
    metadata = email.message_from_bytes(archive.read(f"{info}/METADATA"))
    assert metadata["Version"] == VERSION
    assert metadata["License-Expression"] == "BSD-3-Clause"
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert archive.read(f"{info}/licenses/LICENSE").startswith(b"BSD 3-Clause License")
    classifiers = set(metadata.get_all("Classifier"))
    for tried in ("Django :: 5.2", "Django :: 6.1"):
        assert f"Framework :: {tried}" in classifiers
    for python in ("3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {python}" in classifiers
    assert "Typing :: Typed" in classifiers
    assert metadata["Requires-Python"] == ">=3.11"
    # The README is the long description, as PyPI shows it.
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert metadata.get_payload().startswith("# webfarm\n")


def test_a_new_project_from_the_page_checks_and_migrates(wheel, tmp_path):
    site = installed.make_site(wheel, tmp_path, memcached="127.0.0.1:1")  # migrated by the page's steps
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup(); import importlib.util, progress.bar, webfarm;"
            "import webfarm.progress.api as api;"
            "print(progress.__file__, api.__file__, progress.bar.Bar.__name__,"
            " importlib.util.find_spec('demofarm'), webfarm.__version__)",
        ],
        cwd=site.dir,
        env={**site.env, "DJANGO_SETTINGS_MODULE": "mysite.settings"},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    lib = tmp_path / "lib"
    # PyPI's progress and the library's, side by side; the demo site nowhere.
    assert where.stdout.split() == [
        str(lib / "progress" / "__init__.py"),
        str(lib / "webfarm" / "progress" / "api.py"),
        "Bar",
        "None",
        VERSION,
    ]
    checked = installed.manage(site, "check")
    # One warning, and only it: this site's memcached is nowhere, and the check names it.
    assert "System check identified 1 issue" in checked, checked
    assert "(webfarm_core.W001) memcached at 127.0.0.1:1 does not answer" in checked, checked
    installed.manage(site, "makemigrations", "--check", "--dry-run")


def test_the_page_is_ten_steps_with_a_farm_of_beat_worker_memcached_and_two_nodes():
    page = installdoc.read()
    assert page.steps == list(range(1, len(page.steps) + 1)) and len(page.steps) <= 10
    farm = [
        command.argv[:3]
        for command in page.actions
        if isinstance(command, installdoc.Command) and command.background
    ]
    assert farm == [
        ["memcached", "-l", "127.0.0.1"],
        ["celery", "-A", "mysite"],
        ["celery", "-A", "mysite"],
        ["gunicorn", "mysite.wsgi", "-b"],
        ["gunicorn", "mysite.wsgi", "-b"],
    ]
    assert [
        c.argv[3] for c in page.actions if isinstance(c, installdoc.Command) and c.argv[0] == "celery"
    ] == [
        "worker",
        "beat",
    ]


def _resolved(*requirements: str) -> dict[str, str]:
    """What pip's own resolver picks for these on this Python: name -> version."""
    pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
    done = subprocess.run(
        [*pip, "--disable-pip-version-check", "--report", "-", *requirements],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    report = json.loads(done.stdout)
    return {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in report["install"]}


def test_pip_picks_this_python_s_django_and_the_backport_only_where_django_lacks_tasks(wheel):
    picked = _resolved(str(wheel))
    django = tuple(int(part) for part in picked["django"].split(".")[:2])
    if sys.version_info < (3, 12):
        # Django 6 needs Python 3.12: here it is 5.2, with django.tasks from the backport.
        assert django == (5, 2) and "django-tasks" in picked
    else:
        assert django >= (6, 1) and "django-tasks" not in picked
        # Django 5.2 on this Python: the extra brings the backport.
        older = _resolved(f"webfarm[django52] @ {wheel.as_uri()}", "Django==5.2.*")
        assert older["django"].startswith("5.2.") and "django-tasks" in older
