"""What a project learns of the library: the names of the modules the docs
tell it to import, each module's `__all__` (nothing else there is kept,
docs/releases.md), and the dotted paths docs/install.md has it type."""

import re
from importlib import import_module

from tests.harness import installdoc

# The modules the docs tell a project to import, and their names.
PUBLIC = {
    "webfarm": ["APPS"],
    "webfarm.progress.api": [
        "Job",
        "JobCancelled",
        "JobFailed",
        "JobPart",
        "JobResult",
        "JobType",
        "PartSpec",
        "SlotLimits",
        "Tracker",
        "job_ended",
        "job_type",
        "register",
    ],
    "webfarm.progress.web": ["TryLater", "job_rows", "refuse_over_limit", "start_response"],
    "webfarm.progress.pollgate": ["PollGate"],
    "webfarm.djangotasks": ["owned_by", "task"],
}
DOTTED = re.compile(r"\bwebfarm(?:\.\w+)+")
IMPORTED = re.compile(r"^\s*(?:from|import) (webfarm[\w.]*)", re.M)


def test_each_public_module_says_its_names_and_has_each():
    for name, names in PUBLIC.items():
        module = import_module(name)
        assert sorted(module.__all__) == sorted(names), name
        assert all(hasattr(module, each) for each in names), name


def test_a_project_learns_at_most_twenty_names():
    assert sum(len(names) for names in PUBLIC.values()) <= 20


def test_the_install_page_types_at_most_fourteen_paths_and_imports_only_public_modules():
    typed = [
        path
        for action in installdoc.read().actions
        if isinstance(action, installdoc.File)
        for path in DOTTED.findall(action.text)
    ]
    assert len(typed) <= 14, typed
    imported = {
        module
        for action in installdoc.read().actions
        if isinstance(action, installdoc.File)
        for module in IMPORTED.findall(action.text)
    }
    assert imported <= set(PUBLIC), imported
