"""docs/security.md names, for every promise, the test that breaks if it
stops being true: each test it names exists, and each promise names one."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "security.md"
CITED = re.compile(r"`(tests/[\w/]+\.py)(?:::(test_\w+))?`")


def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    }


def test_every_test_the_security_page_names_exists():
    cited = CITED.findall(PAGE.read_text())
    assert len(cited) > 40
    missing = [
        f"{path}::{name}" if name else path
        for path, name in cited
        if not (ROOT / path).is_file() or (name and name not in _tests_in(ROOT / path))
    ]
    assert not missing, missing


def test_every_promise_about_a_party_names_its_test():
    """A bullet under a party's heading says what they can or cannot do:
    each names a test (of its own, or the one that ends its paragraph)."""
    text = PAGE.read_text()
    parties = text.split("\n## ")[1:5]
    for section in parties:
        for bullet in re.split(r"\n- ", section)[1:]:
            bullet = bullet.split("\n\n")[0]
            assert CITED.search(bullet), bullet[:120]
