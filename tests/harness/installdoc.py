"""docs/install.md, read as a project: its numbered steps, each block whose
first line names a file (`# path`, `{# path #}`, or `..., at the end` to add
to what is there), and its shell lines, in the page's order. Nothing of the
project is written here: a step missing from the page is missing from the
test's project too.
"""

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from tests.harness import processes

PAGE = processes.ROOT / "docs" / "install.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
FILE = re.compile(r"^(?:# |\{# )(?P<path>[\w./-]+\.\w+)(?P<end>, at the end)?(?: #\})?$")
STEP = re.compile(r"^## (\d+)\. ", re.M)


@dataclass
class File:
    path: str
    text: str
    at_the_end: bool


@dataclass
class Command:
    argv: list[str]
    background: bool  # ends with `&`: a process of the farm


@dataclass
class Page:
    steps: list[int] = field(default_factory=list)
    # Files and commands, in the page's order.
    actions: list[File | Command] = field(default_factory=list)


def read(page: Path = PAGE) -> Page:
    text = page.read_text()
    read_page = Page(steps=[int(n) for n in STEP.findall(text)])
    for language, body in BLOCK.findall(text):
        first, _, rest = body.partition("\n")
        named = FILE.match(first)
        if named:
            read_page.actions.append(File(named["path"], rest, bool(named["end"])))
        elif language == "sh":
            for line in body.splitlines():
                argv = shlex.split(line, comments=True)
                if argv:
                    background = argv[-1] == "&"
                    read_page.actions.append(Command(argv[:-1] if background else argv, background))
    return read_page
