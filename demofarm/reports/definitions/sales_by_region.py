from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

from django import forms
from django.urls import reverse

from demofarm.reports import results
from demofarm.reports.definitions.base import (
    DateRangeForm,
    Report,
    cents,
    scan_order_lines,
    split_order_lines,
    write_csv,
)
from demofarm.reports.models import REGIONS
from webfarm.core.charts import png_chart
from webfarm.progress.api import Job, JobFailed, JobPart, JobResult, PartSpec, Tracker

# (region, month) -> [orders, units, gross cents, returned cents]
Totals = dict[tuple[str, str], list[int]]


class SalesByRegionForm(DateRangeForm):
    regions = forms.MultipleChoiceField(
        choices=[(r, r) for r in REGIONS],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Leave empty for every region.",
    )


class SalesByRegion(Report):
    name = "sales-by-region"
    title = "Sales by region and month"
    description = "Orders, units, gross and net sales and returns per region per month, with a chart."
    form_class = SalesByRegionForm

    def split(self, params: dict[str, Any]) -> list[PartSpec] | None:
        """Ranges of order line ids: the parts read them at once on any
        workers, each totalling its own lines; the merge adds the totals up."""
        return split_order_lines()

    def run_part(
        self, *, job: Job, part: JobPart, params: dict[str, Any], tracker: Tracker
    ) -> dict[str, Any]:
        ids = (part.params["first"], part.params["last"])
        return _partial(_scan(tracker, params, ids=ids))

    def merge(self, *, job: Job, parts: list[JobPart], params: dict[str, Any], tracker: Tracker) -> JobResult:
        return self._write(job, tracker, params, _added_up([part.result for part in parts]))

    def run(self, *, job: Job, params: dict[str, Any], tracker: Tracker) -> JobResult:
        """The report in one run (REPORTS_PART_ROWS=0)."""
        return self._write(job, tracker, params, _added_up([_partial(_scan(tracker, params))]))

    def _write(self, job: Job, tracker: Tracker, params: dict[str, Any], totals: Totals) -> JobResult:
        reporter = tracker.reporter
        if not totals:
            raise JobFailed(
                f"No orders from the chosen regions between {params['date_from']} and {params['date_to']}."
            )

        reporter.stage("aggregating", total=len(totals), message="computing net sales and growth")
        rows = []
        previous: dict[str, int] = {}
        for i, ((region, month), (orders, units, gross, refunds)) in enumerate(sorted(totals.items()), 1):
            net = gross - refunds
            growth = ""
            if previous.get(region):
                growth = f"{(net - previous[region]) / previous[region] * 100:.1f}"
            previous[region] = net
            rows.append(
                [
                    region,
                    month,
                    orders,
                    units,
                    cents(gross),
                    cents(refunds),
                    cents(net),
                    cents(net // orders if orders else 0),
                    growth,
                ]
            )
            reporter.update(i)

        write_csv(
            job=job,
            tracker=tracker,
            name="sales-by-region.csv",
            header=[
                "region",
                "month",
                "orders",
                "units",
                "gross",
                "returns",
                "net",
                "average_order",
                "net_growth_pct",
            ],
            rows=rows,
        )
        reporter.set_message("drawing the chart")
        results.save_bytes(job, "sales-by-region.png", "image/png", _chart(totals))
        return JobResult(
            url=reverse("reports:download", args=[job.id, "sales-by-region.csv"]),
            summary=f"{len(rows):,} region-months",
        )


_FIELDS = (
    "order_id",
    "order__placed_on",
    "order__customer__region",
    "quantity",
    "unit_price_cents",
    "returned",
)


def _scan(tracker: Tracker, params: dict[str, Any], *, ids: tuple[int, int] | None = None) -> Iterator:
    filters = {"order__customer__region__in": params["regions"]} if params.get("regions") else {}
    return scan_order_lines(
        tracker, _FIELDS, date_from=params["date_from"], date_to=params["date_to"], ids=ids, **filters
    )


def _partial(lines: Iterable[tuple]) -> dict[str, Any]:
    """One range's totals, JSON-safe, and its first and last order: an order
    whose lines straddle two ranges is counted in both, once too often."""
    totals: Totals = defaultdict(lambda: [0, 0, 0, 0])
    first = last_order = None
    for order_id, placed_on, region, quantity, price, returned in lines:
        month = placed_on.strftime("%Y-%m")
        cell = totals[(region, month)]
        if order_id != last_order:  # an order's lines are contiguous
            cell[0] += 1
            last_order = order_id
            if first is None:
                first = [order_id, region, month]
        cell[1] += quantity
        cell[2] += quantity * price
        if returned:
            cell[3] += quantity * price
    return {
        "cells": [[region, month, *values] for (region, month), values in totals.items()],
        "first": first,
        "last": last_order,
    }


def _added_up(partials: list[dict[str, Any]]) -> Totals:
    """The ranges' totals added up, in id order."""
    totals: Totals = defaultdict(lambda: [0, 0, 0, 0])
    last_order = None
    for partial in partials:
        for region, month, *values in partial["cells"]:
            cell = totals[(region, month)]
            for i, value in enumerate(values):
                cell[i] += value
        first = partial["first"]
        if first is not None:
            order_id, region, month = first
            if order_id == last_order:  # counted by the range before too
                totals[(region, month)][0] -= 1
            last_order = partial["last"]
    return dict(totals)


def _chart(totals: Totals) -> bytes:
    months = sorted({month for _, month in totals})
    regions = sorted({region for region, _ in totals})

    def draw(ax: Any) -> None:
        for region in regions:
            values = [
                (totals[(region, m)][2] - totals[(region, m)][3]) / 100 if (region, m) in totals else 0
                for m in months
            ]
            ax.plot(range(len(months)), values, marker="o", markersize=3, label=region)
        ax.set_xticks(range(len(months)), months)
        ax.set_title("Net sales by region and month")
        ax.set_ylabel("net sales")
        ax.yaxis.set_major_formatter("{x:,.0f}")
        ax.tick_params(axis="x", labelrotation=60, labelsize=7)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)

    return png_chart(draw)
