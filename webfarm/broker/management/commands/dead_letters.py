from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from webfarm.broker.transport import broker_ring, queue_name
from webfarm.core.conf import get_config as memcached_config
from webfarm.queues.conf import default_queue
from webfarm.queues.exceptions import QueueError
from webfarm.queues.queue import DeadLetter, Queue
from webfarm.queues.rings import farm_queues

BATCH = 200


def _when(timestamp: float | None) -> str:
    if timestamp is None:
        return "-"
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S")


class Command(BaseCommand):
    help = (
        "Show a queue's dead letters (messages no consumer could process), put them back "
        "into the queue (--requeue) or drop them (--purge). HTTP front queues are http.<name>; "
        "the memcached broker's are named as Celery names them (celery, or CELERY_TASK_DEFAULT_QUEUE), "
        "or broker:<name>."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "queue", help="the queue's name: sitelog, poll-votes, http.<name>, celery, broker:<name>..."
        )
        action = parser.add_mutually_exclusive_group()
        action.add_argument(
            "--requeue", action="store_true", help="put every dead letter back into the queue"
        )
        action.add_argument("--purge", action="store_true", help="drop every dead letter")
        parser.add_argument("--limit", type=int, default=20, help="how many to show (default 20)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            queue = _queue(options["queue"])
            if not queue.exists():
                _say_unknown(queue.name)
            dead = queue.dead_letters()
            if options["purge"]:
                waiting = queue.stats()["dead_letters"]
                dead.purge()
                self.stdout.write(f"dropped {waiting} dead letters of {queue.name}")
            elif options["requeue"]:
                self.stdout.write(f"put {self._requeue(queue, dead)} dead letters back into {queue.name}")
            else:
                self._show(queue, dead, options["limit"])
        except QueueError as exc:
            raise CommandError(str(exc)) from exc

    def _show(self, queue: Queue, dead: Queue, limit: int) -> None:
        self.stdout.write(f"{queue.stats()['dead_letters']} dead letters of {queue.name}")
        unreadable: list[int] = []
        for message in dead.peek(limit, unreadable=unreadable):  # looking takes nothing away
            letter = DeadLetter.from_json(message.body)
            when = f"enqueued {_when(letter.enqueued_at)}, buried {_when(letter.dead_at)}"
            self.stdout.write(
                f"- #{letter.index}, {letter.deliveries} deliveries, {when}: {letter.reason}\n"
                f"    {letter.body[:300]!r}"
            )
        if unreadable:
            raise CommandError(
                f"{len(unreadable)} dead letters of {queue.name} cannot be read: their MAC does not "
                "match. They were written with another DJANGO_SECRET_KEY than this command's: run it "
                "with the farm's (make run's is in var/secret_key), or they were planted."
            )

    def _requeue(self, queue: Queue, dead: Queue) -> int:
        moved = 0
        while letters := dead.claim_many(BATCH):
            queue.put_many([DeadLetter.from_json(m.body).body for m in letters])
            dead.ack_many([m.receipt for m in letters])
            moved += len(letters)
        dead.layout.recover_interval = 0  # one more pass moves the floor past them: none waits now
        dead.claim_many(1)
        return moved


def _say_unknown(name: str) -> None:
    """A name no process of this farm has used is more likely a typo, or
    another memcached or namespace, than an empty queue: say which it could be
    (and looking must not create it, or the dashboard would list the typo)."""
    known, config = [q.title for q in farm_queues()[0]], memcached_config()
    where = f"memcached {','.join(config['SERVERS'])}, namespace {config['NAMESPACE']!r}"
    raise CommandError(
        f"no queue {name!r} has been used on {where} since it started. Known queues: "
        f"{', '.join(sorted(known)) or 'none'}."
    )


def _queue(name: str) -> Queue:
    """The farm's queue, or the memcached broker's (Celery's queues, which live
    under a namespace of their own)."""
    celery = {default_queue(), "celery"}
    if name.startswith("broker:") or name in celery:
        ring = broker_ring()
        if ring is None:
            if name.startswith("broker:"):
                raise CommandError("Celery's broker is not memcached: its queues are not here")
            return Queue(name)
        return Queue(queue_name(name.removeprefix("broker:")), ring=ring)
    return Queue(name)
