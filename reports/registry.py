"""The report types users can start, by name."""

from reports.definitions.base import Report
from reports.definitions.return_rates import ReturnRates
from reports.definitions.sales_by_region import SalesByRegion
from reports.definitions.top_customers import TopCustomers

REPORTS: dict[str, Report] = {
    report.name: report for report in (SalesByRegion(), TopCustomers(), ReturnRates())
}


def get_report(name: str) -> Report | None:
    return REPORTS.get(name)
