"""What a finished job returns."""

from dataclasses import dataclass


@dataclass(frozen=True)
class JobResult:
    """A job's result: where the user goes next (its main file, a page), and a
    line saying what it made, shown under the finished bar."""

    url: str = ""
    summary: str = ""
