"""What a finished job returns."""

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class JobResult:
    """A job's result: where the user goes next (its main file, a page), and a
    line saying what it made, shown under the finished bar. `value`: what an
    API client reads (JSON; a django.tasks result's return_value)."""

    url: str = ""
    summary: str = ""
    value: Any = None
