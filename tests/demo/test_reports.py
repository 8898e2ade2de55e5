"""Each report's numbers against an independent aggregation in the database."""

import csv
import io
import itertools
from collections import defaultdict

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Case, Count, F, IntegerField, Sum, When
from django.db.models.functions import TruncMonth

from demofarm.reports import dataset, results
from demofarm.reports.conf import get_config
from demofarm.reports.definitions.base import DateRangeForm, Report
from demofarm.reports.models import Customer, Order, OrderLine, ResultFile
from demofarm.reports.registry import all_reports, get_report
from webfarm.progress import services as progress
from webfarm.progress.launching.running import run_job
from webfarm.progress.models import Job

pytestmark = pytest.mark.django_db

PERIOD = {"date_from": "2024-03-01", "date_to": "2025-06-30"}


@pytest.fixture
def shop(settings):
    settings.REPORTS = {**settings.REPORTS, "CHUNK_ROWS": 500}
    dataset.generate(customers=200, products=40, orders=3000, seed=3)


def _run(kind: str, params: dict) -> tuple[Job, list[list[str]]]:
    user = get_user_model().objects.create_user(f"u-{kind}", password="x")
    report = all_reports()[kind]
    job = progress.create_job(owner=user, kind=kind, title=report.describe(params), params=params)
    run_job(job_id=job.id)
    job.refresh_from_db()
    assert job.state == "succeeded", job.error
    csv_file = ResultFile.objects.get(job=job, content_type="text/csv")
    assert job.result_url.endswith(csv_file.name)
    return job, list(csv.reader(io.StringIO(results.read_all(csv_file).decode())))


def test_dataset_is_reproducible_and_lines_of_an_order_are_contiguous(shop):
    assert Order.objects.count() == 3000 and Customer.objects.count() == 200
    order_ids = list(OrderLine.objects.order_by("id").values_list("order_id", flat=True))
    assert order_ids == sorted(order_ids)


def test_sales_by_region(shop):
    job, rows = _run("sales-by-region", {**PERIOD, "regions": ["North", "East"]})
    lines = OrderLine.objects.filter(
        order__placed_on__range=(PERIOD["date_from"], PERIOD["date_to"]),
        order__customer__region__in=["North", "East"],
    )
    expected = (
        lines.annotate(month=TruncMonth("order__placed_on"))
        .values("order__customer__region", "month")
        .annotate(
            orders=Count("order", distinct=True),
            units=Sum("quantity"),
            gross=Sum(F("quantity") * F("unit_price_cents")),
        )
        .order_by("order__customer__region", "month")
    )
    assert rows[0][:7] == ["region", "month", "orders", "units", "gross", "returns", "net"]
    got = [(r[0], r[1], int(r[2]), int(r[3]), r[4]) for r in rows[1:]]
    assert got == [
        (
            e["order__customer__region"],
            e["month"].strftime("%Y-%m"),
            e["orders"],
            e["units"],
            f"{e['gross'] / 100:.2f}",
        )
        for e in expected
    ]
    assert {r[0] for r in rows[1:]} == {"North", "East"}
    assert ResultFile.objects.get(job=job, name="sales-by-region.png").size > 1000


def test_return_rates(shop):
    _, rows = _run("return-rates", {**PERIOD, "category": "Toys", "min_units": 0})
    expected = (
        OrderLine.objects.filter(
            order__placed_on__range=(PERIOD["date_from"], PERIOD["date_to"]), product__category="Toys"
        )
        .values("product__sku")
        .annotate(
            units=Sum("quantity"),
            back=Sum(Case(When(returned=True, then=F("quantity")), default=0, output_field=IntegerField())),
        )
    )
    want = {e["product__sku"]: (e["units"], e["back"]) for e in expected}
    got = {r[0]: (int(r[3]), int(r[4])) for r in rows[1:]}
    assert got == want and all(r[2] == "Toys" for r in rows[1:])
    rates = [float(r[5]) for r in rows[1:]]
    assert rates == sorted(rates, reverse=True)


def test_top_customers_ranks_by_net_revenue(shop):
    _, rows = _run("top-customers", {**PERIOD, "top": 7, "region": ""})
    net = defaultdict(int)
    for customer, quantity, price, returned in OrderLine.objects.filter(
        order__placed_on__range=(PERIOD["date_from"], PERIOD["date_to"])
    ).values_list("order__customer_id", "quantity", "unit_price_cents", "returned"):
        net[customer] += 0 if returned else quantity * price
    best = sorted(net.items(), key=lambda kv: (-kv[1], kv[0]))[:7]
    assert [r[6] for r in rows[1:]] == [f"{v / 100:.2f}" for _, v in best]
    assert [r[0] for r in rows[1:]] == [str(i) for i in range(1, 8)]


def test_a_period_without_orders_fails_with_a_readable_error(shop):
    user = get_user_model().objects.create_user("x", password="x")
    params = {"date_from": "1999-01-01", "date_to": "1999-12-31", "regions": []}
    job = progress.create_job(owner=user, kind="sales-by-region", title="t", params=params)
    run_job(job_id=job.id)
    job.refresh_from_db()
    assert job.state == "failed"
    assert job.error == "No orders from the chosen regions between 1999-01-01 and 1999-12-31."


class _Extra(Report):
    name, title, description = "extra", "An extra report", "Registered by settings."
    form_class = DateRangeForm


def test_report_types_come_from_the_setting(settings):
    assert list(all_reports()) == ["sales-by-region", "top-customers", "return-rates"]
    settings.REPORTS = {
        **settings.REPORTS,
        "TYPES": [*get_config()["TYPES"], "tests.demo.test_reports._Extra"],
    }
    assert isinstance(get_report("extra"), _Extra)
    settings.REPORTS = {**settings.REPORTS, "TYPES": ["demofarm.reports.models.Order"]}
    with pytest.raises(ImproperlyConfigured, match="not a Report subclass"):
        all_reports()


def test_sales_by_region_in_parts_adds_up_to_the_report_in_one_run(shop, settings):
    """The same report split in parts (run one after the other here, on real
    memcached) and merged: the same file as the report run whole, although
    orders straddle the parts' ranges."""
    from webfarm.progress.models import JobPart
    from webfarm.progress.parts import running as fanout

    params = {**PERIOD, "regions": []}
    _, whole = _run("sales-by-region", params)
    settings.REPORTS = {**settings.REPORTS, "PART_ROWS": 1000, "MAX_PARTS": 16}
    report = all_reports()["sales-by-region"]
    parts = report.split(params)
    assert 5 < len(parts) <= 16
    user = get_user_model().objects.create_user("u-split", password="x")
    job = progress.create_job(owner=user, kind=report.name, title="split", params=params, parts=parts)
    for index in range(len(parts)):
        fanout.run_part(job_id=job.id, index=index, worker="test@here#1")
    fanout.merge(job_id=job.id)
    job.refresh_from_db()
    assert job.state == "succeeded", job.error
    split = list(
        csv.reader(
            io.StringIO(
                results.read_all(
                    ResultFile.objects.get(job=job, name=job.result_url.rsplit("/", 1)[1])
                ).decode()
            )
        )
    )
    assert split == whole
    # Orders did straddle: a part began with the order the part before ended with.
    results_in_order = [p.result for p in JobPart.objects.filter(job=job).order_by("index")]
    assert any(
        before["last"] is not None and after["first"] is not None and before["last"] == after["first"][0]
        for before, after in itertools.pairwise(results_in_order)
    )
