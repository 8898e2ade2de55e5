from django.apps import AppConfig


class ImportsConfig(AppConfig):
    name = "demofarm.imports"
    # The label it had in the library, kept: its tables and index names follow it.
    label = "webfarm_imports"
    old_labels = ("imports",)
    verbose_name = "Customer imports from CSV"
