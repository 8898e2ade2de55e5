import logging
import os
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from demofarm.polls.models import Poll
from demofarm.reports.models import Order

DEMO_USERS = [("alice", False), ("bob", False), ("admin", True)]
DEMO_POLL = ("Which report do you run most?", ["Sales by region", "Top customers", "Product return rates"])


class Command(BaseCommand):
    help = "Create the demo accounts and, where there are none yet, a poll and the demo dataset."

    def handle(self, *args: Any, **options: Any) -> None:
        password = os.environ.get("DEMO_PASSWORD", "webfarm-demo")
        users = get_user_model()
        for username, staff in DEMO_USERS:
            if not users.objects.filter(username=username).exists():
                users.objects.create_user(
                    username,
                    f"{username}@example.com",
                    password,
                    is_staff=staff,
                    is_superuser=staff,
                )
                self.stdout.write(f"created demo account {username}")
        if not Poll.objects.exists():
            question, choices = DEMO_POLL
            # Saving a poll forgets its cached copy in memcached, which `make
            # run` has not started yet: there is nothing to forget, so no warning.
            memo = logging.getLogger("webfarm.core.memo")
            level, memo.level = memo.level, logging.ERROR
            try:
                poll = Poll.objects.create(question=question)
                for position, text in enumerate(choices):
                    poll.choices.create(text=text, position=position)
            finally:
                memo.setLevel(level)
            self.stdout.write(f"created a demo poll: {question}")
        if not Order.objects.exists():
            orders = int(os.environ.get("DEMO_ORDERS", "1000000"))
            self.stdout.write(f"generating the demo dataset ({orders:,} orders), once")
            call_command("generate_orders", orders=orders, verbosity=options["verbosity"])
