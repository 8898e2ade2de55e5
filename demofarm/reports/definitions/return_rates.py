from collections import defaultdict
from typing import Any

from django import forms
from django.urls import reverse

from demofarm.reports.definitions.base import DateRangeForm, Report, scan_order_lines, write_csv
from demofarm.reports.models import CATEGORIES, Product
from webfarm.progress.api import Job, JobFailed, JobResult, Tracker


class ReturnRatesForm(DateRangeForm):
    category = forms.ChoiceField(
        choices=[("", "All categories")] + [(c, c) for c in CATEGORIES], required=False
    )
    min_units = forms.IntegerField(
        min_value=0, max_value=1_000_000, initial=10, help_text="Leave out products that sold fewer units."
    )


class ReturnRates(Report):
    name = "return-rates"
    title = "Product return rates"
    description = "Units sold and returned per product, against its category's average."
    form_class = ReturnRatesForm

    def run(self, *, job: Job, params: dict[str, Any], tracker: Tracker) -> JobResult:
        reporter = tracker.reporter
        filters = {"product__category": params["category"]} if params.get("category") else {}
        sold: dict[int, list[int]] = defaultdict(lambda: [0, 0])  # product -> [units, returned]
        for product_id, quantity, returned in scan_order_lines(
            tracker,
            ("product_id", "quantity", "returned"),
            date_from=params["date_from"],
            date_to=params["date_to"],
            **filters,
        ):
            cell = sold[product_id]
            cell[0] += quantity
            if returned:
                cell[1] += quantity

        reporter.stage("aggregating", total=len(sold) or 1, message="computing return rates")
        products = Product.objects.in_bulk(list(sold))
        by_category: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for product_id, (units, back) in sold.items():
            cell = by_category[products[product_id].category]
            cell[0] += units
            cell[1] += back
        rows = []
        for i, (product_id, (units, back)) in enumerate(sold.items(), 1):
            reporter.update(i)
            if units < params["min_units"]:
                continue
            product = products[product_id]
            cat_units, cat_back = by_category[product.category]
            rate = back / units * 100
            average = cat_back / cat_units * 100 if cat_units else 0.0
            rows.append(
                [
                    product.sku,
                    product.name,
                    product.category,
                    units,
                    back,
                    f"{rate:.2f}",
                    f"{average:.2f}",
                    f"{rate - average:+.2f}",
                ]
            )
        if not rows:
            raise JobFailed("No product sold enough units in that period to rate its returns.")
        rows.sort(key=lambda row: (-float(row[5]), row[0]))

        write_csv(
            job=job,
            tracker=tracker,
            name="return-rates.csv",
            header=[
                "sku",
                "product",
                "category",
                "units_sold",
                "units_returned",
                "return_rate_pct",
                "category_rate_pct",
                "vs_category_pct",
            ],
            rows=rows,
        )
        return JobResult(
            url=reverse("reports:download", args=[job.id, "return-rates.csv"]),
            summary=f"{len(rows):,} products",
        )
