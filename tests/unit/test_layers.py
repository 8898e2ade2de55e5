"""The repository reads top to bottom (pyproject.toml, [tool.importlinter]):
the demo site (demofarm) on the library (webfarm), whose apps form a ladder:
core, then queues, then progress | stats | limits | activity | broker, then
dashboard | djangotasks. An import up the ladder, or between two apps on one
rung, fails here; so do the library importing the site, a module on no
rung, and a job type (the site's reports, imports) importing anything of
progress but webfarm.progress.api."""

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
    result = _with_import(tmp_path, "webfarm/core/http.py", "from webfarm.progress.states import State")
    assert result.returncode != 0
    assert "webfarm.core is not allowed to import webfarm.progress" in result.stdout


def test_a_job_type_reaching_past_progress_api_breaks_it(tmp_path):
    """Job-type apps use webfarm.progress.api alone: importing webfarm.progress.store fails."""
    result = _with_import(tmp_path, "demofarm/imports/jobs.py", "from webfarm.progress import store")
    assert result.returncode != 0
    assert "demofarm.imports is not allowed to import webfarm.progress.store" in result.stdout


def test_an_app_importing_the_site_breaks_it(tmp_path):
    """An app that reads the site's settings module could not be installed without it."""
    result = _with_import(tmp_path, "webfarm/progress/store.py", "from demofarm import settings")
    assert result.returncode != 0
    assert "webfarm is not allowed to import demofarm" in result.stdout


def test_a_site_module_on_no_rung_breaks_it(tmp_path):
    """A new module in the library must be placed on the ladder, or it goes unchecked."""
    _copy(tmp_path)
    (tmp_path / "webfarm" / "stray.py").write_text("")
    result = _lint(tmp_path)
    assert result.returncode != 0
    assert "stray" in result.stdout
