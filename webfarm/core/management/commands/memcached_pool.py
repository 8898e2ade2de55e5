import shlex
import subprocess
from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from webfarm.core import poolchange


class Command(BaseCommand):
    help = (
        "Show the memcached servers the farm uses, or change them while it runs (--to): every process "
        "follows, stage by stage, without a restart (docs/farm.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--to", help='the new list, comma-separated host:port, as MEMCACHED["SERVERS"] takes it'
        )
        parser.add_argument(
            "--wait", type=float, default=600.0, help="seconds each stage may wait for processes and queues"
        )
        parser.add_argument(
            "--at-new",
            help="a command to run once every process uses the new list (reload nginx with it)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["to"]:
            self._show()
            return
        at_new = None
        if options["at_new"]:
            argv = shlex.split(options["at_new"])

            def at_new() -> None:
                self.stdout.write(f"running {options['at_new']}")
                subprocess.run(argv, check=True)

        try:
            poolchange.change(options["to"].split(","), say=self._say, wait=options["wait"], at_new=at_new)
        except poolchange.PoolChangeError as exc:
            raise CommandError(str(exc)) from exc

    def _say(self, line: str) -> None:
        self.stdout.write(f"{datetime.now():%H:%M:%S.%f}"[:-3] + f" {line}")

    def _show(self) -> None:
        plan, row, members = poolchange.current()
        self.stdout.write(f"servers: {','.join(plan.servers)}")
        if row is not None:
            self.stdout.write(
                f"change {row.pk}: {row.old} -> {row.new}, stage {row.stage} since {row.staged_at}"
            )
        for member in members:
            self.stdout.write(
                f"  {member.name}: change {member.change}, {member.stage}, seen {member.seen_at}"
            )
