from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from webfarm.stats.harvest import HarvestUnavailable, harvest, summarise


class Command(BaseCommand):
    help = "Move counter increments from memcached into the database, then rebuild today's summaries."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            added = harvest()
        except HarvestUnavailable as exc:
            raise CommandError(str(exc)) from exc
        today = datetime.now(UTC).date()
        summarise(today - timedelta(days=1))
        summarise(today)
        self.stdout.write(f"harvested {sum(added.values())} increments over {len(added)} counters")
