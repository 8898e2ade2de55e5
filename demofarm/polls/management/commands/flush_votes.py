from typing import Any

from django.core.management.base import BaseCommand, CommandError

from demofarm.polls.services import FlusherBusy, flush_all


class Command(BaseCommand):
    help = "Move queued poll votes into the database and rebuild running totals memcached lost."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            done = flush_all()
        except FlusherBusy as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"stored {done['stored']} new votes, counted {done['counted']} not yet in the running totals, "
            f"rebuilt {done['rebuilt']} polls' totals"
        )
