from typing import Any

from django.core.management.commands.migrate import Command as DjangoMigrate

from webfarm.core.oldlabels import adopt_old_labels


class Command(DjangoMigrate):
    """Django's migrate, after adopting the tables and history an app left
    under a label it had before (webfarm.core.oldlabels)."""

    def handle(self, *args: Any, **options: Any) -> None:
        adopted = adopt_old_labels(options["database"])
        if adopted and options["verbosity"] >= 1:
            names = ", ".join(f"{old} -> {new}" for old, new in adopted)
            self.stdout.write(f"Adopted the tables and migrations of the old app labels: {names}")
        super().handle(*args, **options)
