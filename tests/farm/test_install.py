"""The wheel `pip wheel .` builds gives another project the reusable apps:
it holds them with their files and nothing of the site, and a
`django-admin startproject` site that adds them (tests/harness/installed.py)
passes Django's checks and migrates, from the wheel alone.
tests/browser/test_installed_site.py runs such a site end to end."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.harness import installed

pytestmark = pytest.mark.farm


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return installed.build_wheel(tmp_path_factory.mktemp("wheel"))


def test_the_wheel_holds_the_apps_with_their_files_and_nothing_of_the_site(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "progress/api.py",
        "progress/templates/progress/widget.html",
        "progress/static/progress/progress.js",
        "progress/migrations/0008_job_for_api_clients.py",
        "webfarm/djangotasks/backend.py",
        "webfarm/broker/transport.py",
        "webfarm/core/client/__init__.py",
    ):
        assert needed in names
    top = {name.split("/")[0] for name in names}
    assert top == {"progress", "webfarm", wheel.name.removesuffix("-py3-none-any.whl") + ".dist-info"}
    # webfarm is a namespace in the wheel: the site and the apps whose pages
    # extend its templates stay here.
    shipped = {name.split("/")[1] for name in names if name.startswith("webfarm/")}
    assert shipped == {"core", "queues", "broker", "stats", "activity", "djangotasks"}


def test_a_new_project_with_the_apps_checks_and_migrates(wheel, tmp_path):
    site = installed.make_site(wheel, tmp_path)
    env = installed.site_env(tmp_path, "127.0.0.1:1")
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import importlib.util, progress, webfarm.djangotasks as t;"
            "print(progress.__file__, t.__file__, importlib.util.find_spec('webfarm.settings'))",
        ],
        cwd=site,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    lib = tmp_path / "lib"
    assert where.stdout.split() == [
        str(lib / "progress" / "__init__.py"),
        str(lib / "webfarm" / "djangotasks" / "__init__.py"),
        "None",
    ]
    installed.manage(site, env, "check")
    installed.manage(site, env, "migrate", "--no-input")
    installed.manage(site, env, "makemigrations", "--check", "--dry-run")
