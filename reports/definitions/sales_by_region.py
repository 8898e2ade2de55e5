from collections import defaultdict
from typing import Any

from django import forms
from django.urls import reverse

from core.charts import png_chart
from progress.api import Job, JobFailed, JobResult, Tracker
from reports import results
from reports.definitions.base import DateRangeForm, Report, cents, scan_order_lines, write_csv
from reports.models import REGIONS


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

    def run(self, *, job: Job, params: dict[str, Any], tracker: Tracker) -> JobResult:
        reporter = tracker.reporter
        filters = {"order__customer__region__in": params["regions"]} if params.get("regions") else {}
        # (region, month) -> [orders, units, gross cents, returned cents]
        totals: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
        last_order = None
        fields = (
            "order_id",
            "order__placed_on",
            "order__customer__region",
            "quantity",
            "unit_price_cents",
            "returned",
        )
        for order_id, placed_on, region, quantity, price, returned in scan_order_lines(
            reporter, fields, date_from=params["date_from"], date_to=params["date_to"], **filters
        ):
            cell = totals[(region, placed_on.strftime("%Y-%m"))]
            if order_id != last_order:  # an order's lines are contiguous
                cell[0] += 1
                last_order = order_id
            cell[1] += quantity
            cell[2] += quantity * price
            if returned:
                cell[3] += quantity * price
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
            reporter=reporter,
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


def _chart(totals: dict[tuple[str, str], list[int]]) -> bytes:
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
