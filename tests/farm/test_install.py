"""The wheel `pip wheel .` builds gives another project the reusable apps:
a `django-admin startproject` site that adds them (and nothing else from
this repository) passes Django's checks and migrates. The end-to-end run of
such a site, with a worker and a browser, is issue 29's next step."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.harness import processes

pytestmark = pytest.mark.farm

APPS = ["webfarm.core", "webfarm.queues", "progress", "django_tasks", "webfarm.djangotasks"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build = tmp_path_factory.mktemp("build")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(processes.ROOT),
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            "-q",
            "--disable-pip-version-check",
        ],
        check=True,
        capture_output=True,
        timeout=300,
        cwd=build,
    )
    (found,) = out.glob("webfarm-*.whl")
    return found


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


def test_a_new_project_with_the_apps_checks_and_migrates(wheel, tmp_path):
    lib = tmp_path / "lib"
    zipfile.ZipFile(wheel).extractall(lib)
    site = tmp_path / "site"
    site.mkdir()
    subprocess.run(
        [str(processes.BIN / "django-admin"), "startproject", "mysite", str(site)], check=True, timeout=60
    )
    with (site / "mysite" / "settings.py").open("a") as settings:
        settings.write(
            f"\nINSTALLED_APPS += {APPS!r}\n"
            'TASKS = {"default": {"BACKEND": "webfarm.djangotasks.backend.CeleryBackend"}}\n'
        )
    # The wheel's files, not this repository's: the site's folder and lib/ alone are on the path.
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(lib), "DJANGO_SETTINGS_MODULE": "mysite.settings"}
    where = subprocess.run(
        [sys.executable, "-c", "import progress, webfarm; print(progress.__file__, webfarm.__file__)"],
        cwd=site,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert where.stdout.split() == [
        str(lib / "progress" / "__init__.py"),
        str(lib / "webfarm" / "__init__.py"),
    ]
    for command in (["check"], ["migrate", "--no-input"], ["makemigrations", "--check", "--dry-run"]):
        done = subprocess.run(
            [sys.executable, "manage.py", *command],
            cwd=site,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
