"""What every report type has, and the chunked scan they share."""

import csv
import io
import math
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import date
from operator import itemgetter
from typing import Any, ClassVar

from django import forms
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Max, Min

from demofarm.reports import results
from demofarm.reports.conf import get_config
from demofarm.reports.models import Order, OrderLine
from webfarm.progress.api import (
    Job,
    JobFailed,
    JobResult,
    JobType,
    PartSpec,
    SlotLimits,
    Tracker,
)

# Spreadsheet programs run cells that start with these as formulas.
_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


class DateRangeForm(forms.Form):
    date_from = forms.DateField(widget=forms.DateInput(attrs={"type": "date"}))
    date_to = forms.DateField(widget=forms.DateInput(attrs={"type": "date"}))

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        start, end = cleaned.get("date_from"), cleaned.get("date_to")
        if start and end and start > end:
            raise forms.ValidationError("The start date must not be after the end date.")
        return cleaned


class Report(JobType):
    """A report type. Subclasses set the class attributes and implement run()."""

    description: ClassVar[str]
    form_class: ClassVar[type[forms.Form]]
    noun: ClassVar[str] = "report"
    page: ClassVar[str | None] = "reports:job"
    # Reports only read the shop data and write their own result: safe to run twice.
    retry_on_lost: ClassVar[bool] = True
    stages: ClassVar[Sequence[tuple[str, float]]] = (
        ("reading orders", 85),
        ("aggregating", 5),
        ("writing file", 10),
    )

    def time_limit_seconds(self) -> int:
        """The soft time limit: settings.REPORTS["TIME_LIMITS"] may override the type's own."""
        return int(get_config()["TIME_LIMITS"].get(self.name, self.time_limit))

    def limits(self, user: AbstractBaseUser) -> SlotLimits:
        config = get_config()
        return SlotLimits(group="reports", per_user=config["PER_USER"], per_kind=config["PER_KIND"])

    def params_from_form(self, cleaned: dict[str, Any]) -> dict[str, Any]:
        """Form data -> JSON-safe job parameters."""
        return {k: v.isoformat() if isinstance(v, date) else v for k, v in cleaned.items()}

    def describe(self, params: dict[str, Any]) -> str:
        return f"{self.title}, {params.get('date_from')} to {params.get('date_to')}"

    def run(self, *, job: Job, params: dict[str, Any], tracker: Tracker) -> JobResult:
        raise NotImplementedError


def order_line_ids() -> tuple[int, int]:
    """The first and last order line id (JobFailed when there are none)."""
    bounds = OrderLine.objects.aggregate(lo=Min("id"), hi=Max("id"))
    if bounds["lo"] is None:
        raise JobFailed("There are no orders in the database yet.")
    return bounds["lo"], bounds["hi"]


def scan_order_lines(
    tracker: Tracker,
    fields: Sequence[str],
    *,
    date_from: str,
    date_to: str,
    ids: tuple[int, int] | None = None,
    **filters: Any,
) -> Iterator[tuple]:
    """Yield the `fields` of order lines ("order__x": their order's x) in id
    order, reporting per chunk: every line placed between the dates, or
    those whose id is in `ids` (first, last), a part's range. `filters` on
    "order__..." apply to the orders, the others to the lines.

    A chunk is two queries, each on a primary key range: its lines, then
    their orders (ids from the lines' first order to their last). One query
    joining the two had PostgreSQL scan every order for every chunk, in
    parallel workers that took every core: three times slower, and a report
    split in parts gained little from a second worker process. Chunks are
    id ranges, not OFFSETs, so every query costs the same however far the
    scan has got.

    The dates are checked here, not in the orders' query: with them there,
    SQLite read the orders through their date index, the whole period for
    every chunk (8 ms a query on 120,000 orders, against 0.2 ms on the key).
    """
    lo, hi = ids if ids is not None else order_line_ids()
    total = max(hi - lo + 1, 0)
    config = get_config()
    chunk, pause = config["CHUNK_ROWS"], config["CHUNK_PAUSE"]
    reporter = tracker.reporter
    reporter.stage("reading orders", total=total, message="reading order lines")
    line_fields = [name for name in fields if not name.startswith("order__")]
    order_fields = [name.removeprefix("order__") for name in fields if name.startswith("order__")]
    # Where each field is in a line's row and its order's, put together.
    joined = ["order_id", *line_fields, *(f"order__{name}" for name in order_fields)]
    pick = itemgetter(*(joined.index(name) for name in fields))
    on_orders = {
        name.removeprefix("order__"): value for name, value in filters.items() if name.startswith("order__")
    }
    on_lines = {name: value for name, value in filters.items() if not name.startswith("order__")}
    lines = OrderLine.objects.filter(**on_lines).order_by("id")
    orders = Order.objects.filter(**on_orders)
    first_day, last_day = date.fromisoformat(date_from), date.fromisoformat(date_to)
    for start in range(lo, hi + 1, chunk):
        rows = list(
            lines.filter(id__gte=start, id__lt=min(start + chunk, hi + 1)).values_list(
                "order_id", *line_fields
            )
        )
        if rows:
            placed = orders.filter(id__gte=min(row[0] for row in rows), id__lte=max(row[0] for row in rows))
            found = {
                order[0]: order[2:]
                for order in placed.values_list("id", "placed_on", *order_fields)
                if first_day <= order[1] <= last_day
            }
            for row in rows:
                order = found.get(row[0])
                if order is not None:
                    yield pick(row + order) if len(fields) > 1 else (pick(row + order),)
        done = min(start + chunk, hi + 1) - lo
        reporter.update(done, message=f"{done:,} of {total:,} order lines read")
        if pause:
            time.sleep(pause)


def split_order_lines() -> list[PartSpec] | None:
    """The order lines in id ranges of about PART_ROWS, at most MAX_PARTS of
    them (one range, to fail in the part, when there are no lines); None,
    to run whole, when PART_ROWS is 0."""
    config = get_config()
    if config["PART_ROWS"] <= 0:
        return None
    bounds = OrderLine.objects.aggregate(lo=Min("id"), hi=Max("id"))
    lo, hi = bounds["lo"], bounds["hi"]
    if lo is None:
        return [PartSpec(size=1, params={"first": 0, "last": -1})]
    rows = hi - lo + 1
    count = max(1, min(math.ceil(rows / max(config["PART_ROWS"], 1)), config["MAX_PARTS"], JobType.max_parts))
    step = math.ceil(rows / count)
    return [
        PartSpec(
            size=min(step, hi + 1 - first), params={"first": first, "last": min(first + step, hi + 1) - 1}
        )
        for first in range(lo, hi + 1, step)
    ]


def safe_cell(value: object) -> object:
    if isinstance(value, str) and value.startswith(_FORMULA_PREFIXES):
        return "'" + value
    return value


def write_csv(
    *,
    job: Job,
    tracker: Tracker,
    name: str,
    header: Sequence[str],
    rows: Sequence[Iterable[object]],
) -> results.ResultWriter:
    """Write rows as a CSV result file, reporting rows written."""
    reporter = tracker.reporter
    reporter.stage("writing file", total=len(rows), message=f"writing {name}")
    with results.ResultWriter(job, name, "text/csv") as out:
        text = io.TextIOWrapper(out, encoding="utf-8", newline="", write_through=True)
        writer = csv.writer(text)
        writer.writerow(header)
        for i, row in enumerate(rows, 1):
            writer.writerow([safe_cell(v) for v in row])
            reporter.update(i)
        text.flush()
        text.detach()
    return out


def cents(value: int) -> str:
    return f"{value / 100:.2f}"
