"""Every link between the repository's pages reaches a file that is there,
and a heading that is there: pages move (docs/ is the users', CONTRIBUTING.md
the contributors', demofarm/README.md the demo's), links must follow."""

import re

from tests.harness import processes

ROOT = processes.ROOT
PAGES = [
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    ROOT / "CHANGELOG.md",
    ROOT / "demofarm" / "README.md",
    ROOT / "bench" / "RESULTS.md",
    *sorted((ROOT / "docs").glob("*.md")),
]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _anchors(text: str) -> set[str]:
    """GitHub's anchors of a page's headings."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", FENCE.sub("", text), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower().replace("`", "")).replace(" ", "-")
        found.add(slug)
    return found


def test_every_link_between_pages_reaches_a_file_and_a_heading_that_are_there():
    broken = []
    for page in PAGES:
        for target in LINK.findall(FENCE.sub("", page.read_text())):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            reached = (page.parent / path).resolve() if path else page
            if not reached.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
            elif anchor and reached.suffix == ".md" and anchor not in _anchors(reached.read_text()):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []
