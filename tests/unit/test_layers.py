"""The apps form a ladder (pyproject.toml, [tool.importlinter]):
webfarm.core, then webfarm.queues, then progress | stats | limits |
activity, then reports | polls | dashboard, then imports, and the site
(webfarm's settings, URLs, Celery app) on top. An import up the ladder, or
between two apps on one rung, fails here; so do an app importing the site
and a job-type app (reports, imports) importing anything of progress but
progress.api."""

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
LINT = str(Path(sys.executable).with_name("lint-imports"))


def _lint(where: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [LINT, "--no-cache"], cwd=where, capture_output=True, text=True, timeout=120, check=False
    )


def test_every_import_points_down_the_ladder():
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def _copy(tmp_path: Path) -> None:
    for app in APPS:
        shutil.copytree(ROOT / app, tmp_path / app, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)


def _with_import(tmp_path: Path, module: str, line: str) -> subprocess.CompletedProcess:
    """Lint a copy of the tree with `line` added to `module`."""
    _copy(tmp_path)
    with (tmp_path / module).open("a") as source:
        source.write(f"\n{line}  # noqa\n")
    return _lint(tmp_path)


def test_an_import_up_the_ladder_breaks_it(tmp_path):
    """The contract is live: the same tree with one upward import fails."""
    result = _with_import(tmp_path, "webfarm/core/http.py", "from progress.states import State")
    assert result.returncode != 0
    assert "webfarm.core is not allowed to import progress" in result.stdout


def test_a_job_type_reaching_past_progress_api_breaks_it(tmp_path):
    """Job-type apps use progress.api alone: importing progress.store fails."""
    result = _with_import(tmp_path, "webfarm/imports/jobs.py", "from progress import store")
    assert result.returncode != 0
    assert "webfarm.imports is not allowed to import progress.store" in result.stdout


def test_an_app_importing_the_site_breaks_it(tmp_path):
    """An app that reads the site's settings module could not be installed without it."""
    result = _with_import(tmp_path, "progress/store.py", "from webfarm import settings")
    assert result.returncode != 0
    assert "progress is not allowed to import webfarm.settings" in result.stdout


def test_a_site_module_on_no_rung_breaks_it(tmp_path):
    """A new module in webfarm/ must be placed on the ladder, or it goes unchecked."""
    _copy(tmp_path)
    (tmp_path / "webfarm" / "stray.py").write_text("")
    result = _lint(tmp_path)
    assert result.returncode != 0
    assert "stray" in result.stdout
