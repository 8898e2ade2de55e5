"""A Django project this repository did not write, made from docs/install.md
alone (tests/harness/installdoc.py reads the page): `django-admin
startproject`, then each file and command the page gives, with the apps
from the wheel. The repository is never on the project's path: what it runs
comes from the wheel, installed with PyPI's `progress` (a terminal
progress-bar library) beside it.
"""

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.harness import installdoc, processes

# PyPI's own `progress`, a popular package whose top-level name the library
# once took: the project has it too (pip checks the hash).
PYPI_PROGRESS = (
    "progress==1.6.1 --hash=sha256:5239f22f305c12fdc8ce6e0e47f70f21622a935e16eafc4535617112e7c7ea0b"
)
# What the page's memcached address and ports become in the test's project.
PAGE_MEMCACHED = "127.0.0.1:11211"
# Programs the page runs, from the test's interpreter (the venv of its leg).
PROGRAMS = {
    "python": sys.executable,
    **{name: str(processes.BIN / name) for name in ("django-admin", "celery", "gunicorn")},
}


def build_wheel(out: Path) -> Path:
    """`pip wheel .` of this repository, into `out`. It is built from a copy:
    setuptools writes build/ and *.egg-info into the tree it builds, which
    two builds at once (xdist workers, the two legs) would share."""
    source = out / "source"
    shutil.copytree(
        processes.ROOT / "webfarm", source / "webfarm", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(processes.ROOT / name, source)
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*pip, str(source), "-w", str(out), "-q", "--disable-pip-version-check"],
        check=True,
        capture_output=True,
        timeout=300,
        cwd=out,
    )
    (found,) = out.glob("webfarm-*.whl")
    return found


def install(wheel: Path, lib: Path) -> None:
    """The wheel, then PyPI's `progress`, into one folder: a second package
    with the first's top-level name would be refused there."""
    requirement = lib.parent / "requirements-pypi.txt"
    requirement.write_text(PYPI_PROGRESS + "\n")
    pip = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps"]
    for what in ([str(wheel)], ["--require-hashes", "-r", str(requirement)]):
        subprocess.run(
            [*pip, "--target", str(lib), *what],
            check=True,
            capture_output=True,
            timeout=300,
        )


@dataclass
class Site:
    dir: Path  # where manage.py is
    env: dict[str, str]
    farm: list[installdoc.Command]  # the page's processes, in its order, not started


def make_site(wheel: Path, base: Path, memcached: str) -> Site:
    """The page's project in `base`, with the wheel and PyPI's `progress`
    installed in base/lib, every file written and every command run up to
    its farm's processes (returned to start). `memcached` replaces the page's
    address."""
    install(wheel, base / "lib")
    env = site_env(base)
    here = base
    farm = []
    for action in installdoc.read().actions:
        if isinstance(action, installdoc.File):
            path = here / action.path
            path.parent.mkdir(parents=True, exist_ok=True)
            text = action.text.replace(PAGE_MEMCACHED, memcached)
            with path.open("a" if action.at_the_end else "w") as file:
                file.write("\n" + text if action.at_the_end else text)
        elif action.background:
            farm.append(action)
        elif action.argv[0] == "cd":
            here = here / action.argv[1]
        elif action.argv[0] == "pip" or action.argv[-1] == "createsuperuser":
            continue  # the wheel is installed above; the test makes its own users
        else:
            argv = [PROGRAMS.get(action.argv[0], action.argv[0]), *action.argv[1:]]
            done = subprocess.run(argv, cwd=here, env=env, capture_output=True, text=True, timeout=120)
            if done.returncode:
                raise RuntimeError(f"{' '.join(action.argv)} failed:\n{done.stdout}\n{done.stderr}")
    return Site(here, env, farm)


def start_farm(site: Site, memcached_port: int, log_dir: Path, started: list[processes.Process]) -> list[str]:
    """The page's farm processes, on ports of the test's own, added to
    `started` as each starts (the caller stops them); the web nodes' URLs."""
    nodes = []
    for n, command in enumerate(site.farm):
        argv = [PROGRAMS.get(command.argv[0], command.argv[0]), *command.argv[1:]]
        if command.argv[0] == "memcached":
            argv[argv.index("-p") + 1] = str(memcached_port)
            if os.geteuid() == 0:
                argv += ["-u", "root"]  # memcached will not run as root without being told
        elif command.argv[0] == "gunicorn":
            port = processes.free_port()
            argv[argv.index("-b") + 1] = f"127.0.0.1:{port}"
            nodes.append(f"http://127.0.0.1:{port}")
        name = f"site-{n}-{command.argv[0]}-{'-'.join(a for a in command.argv[1:] if a.isalpha())[:20]}"
        started.append(processes.Process(name, argv, log_dir=log_dir, env=site.env, cwd=site.dir).start())
    return nodes


def site_env(base: Path) -> dict[str, str]:
    """The project's environment: the wheel's files on the path, never this repository."""
    return {"PATH": f"{processes.BIN}:/usr/bin:/bin", "PYTHONPATH": str(base / "lib")}


def manage(site: Site, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=site.dir,
        env=site.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout + done.stderr
