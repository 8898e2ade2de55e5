from django.apps import AppConfig


class ImportsConfig(AppConfig):
    name = "imports"
    verbose_name = "Customer imports from CSV"
