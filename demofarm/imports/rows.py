"""Reading a customer CSV and checking its rows: pure functions, no database.

The file's first line names the columns (any order, any case):
name, email, region, joined_on. Each row either becomes a customer's fields
or is rejected with a sentence saying why.
"""

import csv
import io
import re
from collections.abc import Iterator
from datetime import date
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_email

from demofarm.reports.models import REGIONS

COLUMNS = ("name", "email", "region", "joined_on")
MAX_NAME = 100
# What a rejected row keeps of its cells, to show and download: enough to find it.
KEPT_CELLS, KEPT_CELL_CHARS = 8, 200

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_REGIONS = {region.lower(): region for region in REGIONS}


class BadFile(ValueError):
    """The file as a whole cannot be imported; the message says why."""


class Rejected(ValueError):
    """One row cannot be imported; the message says why."""


def decode(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise BadFile(
            f"The file is not UTF-8 text (line {line} has bytes that are not). Save it as CSV UTF-8."
        ) from exc


def columns_of(header: list[str]) -> dict[str, int]:
    """The position of each column, from the header row."""
    names = [cell.strip().lower() for cell in header]
    unknown = [n for n in names if n not in COLUMNS]
    missing = [c for c in COLUMNS if c not in names]
    if unknown or missing or len(set(names)) != len(names):
        raise BadFile(
            "The first line must name the columns "
            + ", ".join(COLUMNS)
            + f"; it has: {', '.join(h[:40] for h in header[:10]) or 'nothing'}."
        )
    return {name: names.index(name) for name in COLUMNS}


def read(data: bytes, *, max_rows: int) -> tuple[dict[str, int], list[tuple[int, list[str]]]]:
    """The columns and the rows (line number, cells) of a CSV file, or BadFile."""
    text = decode(data)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if header is None:
            raise BadFile("The file is empty.")
        columns = columns_of(header)
        rows: list[tuple[int, list[str]]] = []
        for cells in reader:
            if not any(cell.strip() for cell in cells):
                continue  # a blank line
            rows.append((reader.line_num, cells))
            if len(rows) > max_rows:
                raise BadFile(f"The file has more than {max_rows:,} rows; split it and import each part.")
    except csv.Error as exc:
        raise BadFile(f"The file is not valid CSV at line {reader.line_num}: {exc}.") from exc
    if not rows:
        raise BadFile("The file has a header but no rows.")
    return columns, rows


def check(cells: list[str], columns: dict[str, int], *, today: date) -> dict[str, Any]:
    """A row's customer fields, or Rejected with why."""
    if len(cells) != len(columns):
        raise Rejected(f"has {len(cells)} cells, not {len(columns)}")
    if any("\x00" in cell for cell in cells):
        raise Rejected("contains a NUL character")
    name = cells[columns["name"]].strip()
    email = cells[columns["email"]].strip().lower()
    region = cells[columns["region"]].strip()
    joined = cells[columns["joined_on"]].strip()
    if not name:
        raise Rejected("the name is empty")
    if len(name) > MAX_NAME:
        raise Rejected(f"the name is longer than {MAX_NAME} characters")
    try:
        validate_email(email)
    except ValidationError:
        raise Rejected(f"{email[:60]!r} is not an e-mail address") from None
    if region.lower() not in _REGIONS:
        raise Rejected(f"the region {region[:40]!r} is not one of {', '.join(REGIONS)}")
    if not _DATE.fullmatch(joined):
        raise Rejected(f"the date {joined[:40]!r} is not written YYYY-MM-DD")
    try:
        joined_on = date.fromisoformat(joined)
    except ValueError:
        raise Rejected(f"{joined} is not a date") from None
    if joined_on > today:
        raise Rejected(f"{joined} is in the future")
    return {"name": name, "email": email, "region": _REGIONS[region.lower()], "joined_on": joined_on}


def kept(cells: list[str]) -> list[str]:
    """A rejected row's cells as stored: bounded, and without NUL (which a
    PostgreSQL JSON value cannot hold)."""
    return [cell[:KEPT_CELL_CHARS].replace("\x00", "\ufffd") for cell in cells[:KEPT_CELLS]]


def checked(
    rows: list[tuple[int, list[str]]], columns: dict[str, int], *, today: date
) -> Iterator[tuple[int, list[str], dict[str, Any] | str]]:
    """Each row with its fields, or with the reason it is rejected (a repeated
    e-mail address in the file rejects the later rows)."""
    seen: dict[str, int] = {}
    for line, cells in rows:
        try:
            fields = check(cells, columns, today=today)
        except Rejected as exc:
            yield line, cells, str(exc)
            continue
        first = seen.setdefault(fields["email"], line)
        yield line, cells, fields if first == line else f"{fields['email']} is already on line {first}"
