"""The apps form a ladder (pyproject.toml, [tool.importlinter]): core, then
queues, then progress | stats | limits | activity, then reports | polls |
dashboard, then webfarm. An import up the ladder, or between two apps on one
rung, fails here."""

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
LINT = str(Path(sys.executable).with_name("lint-imports"))


def _lint(where: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [LINT, "--no-cache"], cwd=where, capture_output=True, text=True, timeout=120, check=False
    )


def test_every_import_points_down_the_ladder():
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_import_up_the_ladder_breaks_it(tmp_path):
    """The contract is live: the same tree with one upward import fails."""
    for app in APPS:
        shutil.copytree(ROOT / app, tmp_path / app, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    with (tmp_path / "core" / "http.py").open("a") as module:
        module.write("\nfrom progress.states import State  # noqa\n")
    result = _lint(tmp_path)
    assert result.returncode != 0
    assert "core is not allowed to import progress" in result.stdout
