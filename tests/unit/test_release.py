"""What a team pins: the version the package says is the one its metadata
and changelog say, and the licence is there to read."""

import re
import tomllib

import webfarm
from tests.harness import processes

PROJECT = tomllib.loads((processes.ROOT / "pyproject.toml").read_text())["project"]


def test_the_package_says_the_version_it_was_installed_as():
    assert webfarm.__version__ == PROJECT["version"]


def test_the_changelog_has_a_section_for_this_version():
    sections = re.findall(r"^## (\S+)", (processes.ROOT / "CHANGELOG.md").read_text(), flags=re.MULTILINE)
    assert sections[0] == PROJECT["version"]


def test_the_licence_file_is_the_one_the_metadata_names():
    assert PROJECT["license"] == "BSD-3-Clause"
    assert (processes.ROOT / "LICENSE").read_text().startswith("BSD 3-Clause License")
