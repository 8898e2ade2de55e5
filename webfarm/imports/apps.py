from django.apps import AppConfig


class ImportsConfig(AppConfig):
    name = "webfarm.imports"
    label = "webfarm_imports"
    verbose_name = "Customer imports from CSV"
