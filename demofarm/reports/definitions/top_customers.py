import heapq
from collections import defaultdict
from typing import Any

from django import forms
from django.urls import reverse

from demofarm.reports import results
from demofarm.reports.definitions.base import DateRangeForm, Report, cents, scan_order_lines, write_csv
from demofarm.reports.models import REGIONS, Customer
from webfarm.core.charts import png_chart
from webfarm.progress.api import Job, JobFailed, JobResult, Tracker


class TopCustomersForm(DateRangeForm):
    top = forms.IntegerField(
        min_value=1, max_value=10_000, initial=100, help_text="How many customers to list."
    )
    region = forms.ChoiceField(choices=[("", "All regions")] + [(r, r) for r in REGIONS], required=False)


class TopCustomers(Report):
    name = "top-customers"
    title = "Top customers"
    description = "Customers ranked by net revenue, with orders, units and average order value."
    form_class = TopCustomersForm

    def describe(self, params: dict[str, Any]) -> str:
        return f"Top {params['top']} customers, {params['date_from']} to {params['date_to']}"

    def run(self, *, job: Job, params: dict[str, Any], tracker: Tracker) -> JobResult:
        reporter = tracker.reporter
        filters = {"order__customer__region": params["region"]} if params.get("region") else {}
        # customer -> [orders, units, net cents]
        totals: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
        last_order = None
        fields = ("order_id", "order__customer_id", "quantity", "unit_price_cents", "returned")
        for order_id, customer_id, quantity, price, returned in scan_order_lines(
            tracker, fields, date_from=params["date_from"], date_to=params["date_to"], **filters
        ):
            cell = totals[customer_id]
            if order_id != last_order:
                cell[0] += 1
                last_order = order_id
            cell[1] += quantity
            if not returned:
                cell[2] += quantity * price
        if not totals:
            raise JobFailed(f"No orders between {params['date_from']} and {params['date_to']}.")

        reporter.stage("aggregating", total=2, message="ranking customers")
        best = heapq.nlargest(params["top"], totals.items(), key=lambda item: (item[1][2], -item[0]))
        reporter.update(1)
        customers = Customer.objects.in_bulk([customer_id for customer_id, _ in best])
        reporter.update(2)
        rows = []
        for rank, (customer_id, (orders, units, net)) in enumerate(best, 1):
            customer = customers[customer_id]
            rows.append(
                [
                    rank,
                    customer.name,
                    customer.email,
                    customer.region,
                    orders,
                    units,
                    cents(net),
                    cents(net // orders if orders else 0),
                ]
            )

        write_csv(
            job=job,
            tracker=tracker,
            name="top-customers.csv",
            header=["rank", "customer", "email", "region", "orders", "units", "net_revenue", "average_order"],
            rows=rows,
        )
        reporter.set_message("drawing the chart")
        results.save_bytes(job, "top-customers.png", "image/png", _chart(rows[:15]))
        return JobResult(
            url=reverse("reports:download", args=[job.id, "top-customers.csv"]),
            summary=f"{len(rows):,} customers ranked",
        )


def _chart(rows: list[list[Any]]) -> bytes:
    def draw(ax: Any) -> None:
        names = [row[1] for row in reversed(rows)]
        values = [float(row[6]) for row in reversed(rows)]
        ax.barh(names, values, color="#3b7dd8")
        ax.set_title(f"Top {len(rows)} customers by net revenue")
        ax.set_xlabel("net revenue")
        ax.xaxis.set_major_formatter("{x:,.0f}")
        ax.tick_params(axis="y", labelsize=8)
        ax.grid(axis="x", alpha=0.3)

    return png_chart(draw)
