from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from webfarm.activity.conf import log_file
from webfarm.activity.drain import DrainerBusy, drain


class Command(BaseCommand):
    help = "Append the site activity log from memcached to a JSON-lines file."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--file", default=str(log_file()))
        parser.add_argument("--follow", action="store_true", help="keep draining until stopped")

    def handle(self, *args: Any, **options: Any) -> None:
        def report(batch: int, total: int) -> None:
            self.stdout.write(f"wrote {batch} lines ({total} since the start)")

        hear = report if options["follow"] else None
        if options["follow"]:
            self.stdout.write(f"draining the site log into {options['file']} until stopped (Ctrl-C)")
        try:
            written = drain(Path(options["file"]), follow=options["follow"], on_written=hear)
        except DrainerBusy as exc:
            raise CommandError(str(exc)) from exc
        except KeyboardInterrupt:
            written = None  # Ctrl-C on --follow: what was written is said above
        if written is not None:
            self.stdout.write(f"wrote {written} lines to {options['file']}")
