from typing import Any

from django.core.management.base import BaseCommand, CommandError

from webfarm.queues.conf import get_config
from webfarm.queues.mirror import NoMirrorInSync, mirrored_client, repair


class Command(BaseCommand):
    help = 'Copy the queues back to a mirror memcached that has returned (QUEUES["MIRRORS"]).'

    def handle(self, *args: Any, **options: Any) -> None:
        mirrors = get_config()["MIRRORS"]
        if len(mirrors) != 2:
            raise CommandError('QUEUES["MIRRORS"] must name two memcached servers')
        try:
            done = repair(mirrored_client(mirrors))
        except NoMirrorInSync as exc:
            raise CommandError(str(exc)) from exc
        for line in done or ["both mirrors are in sync (or the other is still unreachable)"]:
            self.stdout.write(line)
