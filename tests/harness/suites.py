"""Two suites, two projects. tests/unit is the library's own suite, on its
test project (tests/project), which installs the apps as docs/install.md
does and knows nothing of the demo; tests/demo, farm, hosts and browser are
the demo's, on its settings (tests/harness/farm_settings.py), and start its
farms. A session runs one suite: the folders it is given choose the settings
(`make test` runs the two, one after the other). `--ds` still overrides.

Loaded with `-p` (pyproject.toml's addopts), so this module's hook wraps
pytest-django's, which reads DJANGO_SETTINGS_MODULE from the environment
before the ini file.
"""

import json
import os
from collections.abc import Generator
from pathlib import Path

import pytest

LIBRARY = "tests.project.settings"
DEMO = "tests.harness.farm_settings"
TESTS = Path(__file__).resolve().parent.parent
SUITE_OF_TIER = {"unit": LIBRARY, "demo": DEMO, "farm": DEMO, "hosts": DEMO, "browser": DEMO}


def settings_for(paths: list[str], rootdir: Path) -> str:
    """The settings module of the suite the paths are in; a UsageError for
    paths of both suites (tests/ itself holds both)."""
    chosen: dict[str, str] = {}
    for given in paths:
        path = (rootdir / given.split("::")[0]).resolve()
        if path == TESTS or path in TESTS.parents:
            chosen |= {LIBRARY: given, DEMO: given}
        elif path.is_relative_to(TESTS):
            tier = path.relative_to(TESTS).parts[0]
            if tier in SUITE_OF_TIER:
                chosen[SUITE_OF_TIER[tier]] = given
    if len(chosen) > 1:
        raise pytest.UsageError(
            f"{chosen[LIBRARY]} runs on the library's test project (tests/unit), {chosen[DEMO]} on the "
            "demo's settings (tests/demo, farm, hosts, browser): run them in two sessions (as make test does)"
        )
    return next(iter(chosen), LIBRARY)


def running() -> str:
    """The settings module of this session's suite."""
    return os.environ["DJANGO_SETTINGS_MODULE"]


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> Generator:
    given = [a for a in early_config.known_args_namespace.file_or_dir if not a.startswith("-")]
    if not getattr(early_config.known_args_namespace, "ds", None):
        paths = given or early_config.getini("testpaths")
        os.environ["DJANGO_SETTINGS_MODULE"] = settings_for(paths, Path(early_config.invocation_params.dir))
    return (yield)


def library_env(servers: str, namespace: str, *, database: Path | None = None, **changed: dict) -> dict:
    """The environment of a process a library test starts (a consumer, a
    drainer): the test project's settings on the test's memcached and
    namespace, with the app settings the test changed (QUEUES={...})."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": LIBRARY,
        "WEBFARM_TEST_MEMCACHED": servers,
        "WEBFARM_TEST_NAMESPACE": namespace,
        "WEBFARM_TEST_SETTINGS": json.dumps(changed),
    }
    if database is not None:
        env["WEBFARM_TEST_DATABASE"] = str(database)
    return env
