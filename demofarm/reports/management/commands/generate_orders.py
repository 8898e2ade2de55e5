import sys
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand
from tqdm import tqdm

from demofarm.reports import dataset
from demofarm.reports.selectors import DATASET_KEY, DATASET_TTL
from webfarm.core.memo import forget


class Command(BaseCommand):
    help = "Add a synthetic dataset of customers, products, orders and order lines."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--customers", type=int, default=20_000)
        parser.add_argument("--products", type=int, default=800)
        parser.add_argument("--orders", type=int, default=1_000_000)
        parser.add_argument("--seed", type=int, default=7)

    def handle(self, *args: Any, **options: Any) -> None:
        with tqdm(
            total=options["orders"],
            unit="order",
            desc="generating orders",
            disable=options["verbosity"] == 0,
            # A log file (CI) gets a line every 10 s, not a redraw every 0.1 s.
            mininterval=0.1 if sys.stderr.isatty() else 10,
        ) as bar:
            dataset.generate(
                customers=options["customers"],
                products=options["products"],
                orders=options["orders"],
                seed=options["seed"],
                on_progress=bar.update,
            )
        if not forget(DATASET_KEY, warn=False):
            # Usual at set-up, before memcached runs; only an older summary it holds would be stale.
            self.stdout.write(
                f"memcached is not reachable: a dataset summary it holds from before shows "
                f"on the reports page for up to {DATASET_TTL} s"
            )
