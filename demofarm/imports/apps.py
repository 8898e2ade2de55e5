from django.apps import AppConfig


class ImportsConfig(AppConfig):
    name = "demofarm.imports"
    label = "imports"
    verbose_name = "Customer imports from CSV"
