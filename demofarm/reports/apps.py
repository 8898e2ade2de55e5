from django.apps import AppConfig


class ReportsConfig(AppConfig):
    name = "demofarm.reports"
    label = "reports"
    verbose_name = "Report jobs"
