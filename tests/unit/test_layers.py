"""The apps form a ladder (pyproject.toml, [tool.importlinter]): core, then
queues, then progress | stats | limits | activity, then reports | polls |
dashboard, then imports, then webfarm. An import up the ladder, or between
two apps on one rung, fails here; so does a job-type app (reports, imports)
importing anything of progress but progress.api."""

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


def _with_import(tmp_path: Path, module: str, line: str) -> subprocess.CompletedProcess:
    """Lint a copy of the tree with `line` added to `module`."""
    for app in APPS:
        shutil.copytree(ROOT / app, tmp_path / app, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    with (tmp_path / module).open("a") as source:
        source.write(f"\n{line}  # noqa\n")
    return _lint(tmp_path)


def test_an_import_up_the_ladder_breaks_it(tmp_path):
    """The contract is live: the same tree with one upward import fails."""
    result = _with_import(tmp_path, "core/http.py", "from progress.states import State")
    assert result.returncode != 0
    assert "core is not allowed to import progress" in result.stdout


def test_a_job_type_reaching_past_progress_api_breaks_it(tmp_path):
    """Job-type apps use progress.api alone: importing progress.store fails."""
    result = _with_import(tmp_path, "imports/jobs.py", "from progress import store")
    assert result.returncode != 0
    assert "imports is not allowed to import progress.store" in result.stdout
