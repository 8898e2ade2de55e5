from typing import Any

from django.core.management.base import BaseCommand

from webfarm.progress.launching.running import reap_lost_jobs


class Command(BaseCommand):
    help = "End running jobs whose worker stopped beating (lost), running each again once where allowed."

    def handle(self, *args: Any, **options: Any) -> None:
        lost = reap_lost_jobs()
        self.stdout.write(f"{len(lost)} lost job(s){': ' + ', '.join(lost) if lost else ''}")
