"""A reproducible synthetic shop: customers, products, orders and order lines."""

import random
from collections.abc import Callable
from datetime import date, timedelta
from itertools import accumulate

from django.core.management.color import no_style
from django.db import connection, transaction
from django.db.models import Max

from demofarm.reports.models import CATEGORIES, REGIONS, Customer, Order, OrderLine, Product

FIRST = [
    "Ada",
    "Ben",
    "Chloe",
    "Dev",
    "Eve",
    "Femi",
    "Gus",
    "Hana",
    "Ivo",
    "Jia",
    "Kai",
    "Lena",
    "Mo",
    "Nia",
    "Otto",
    "Pia",
    "Quinn",
    "Rosa",
    "Sam",
    "Tess",
    "Uma",
    "Vik",
    "Wen",
    "Yara",
]
LAST = [
    "Abbott",
    "Baker",
    "Chen",
    "Diaz",
    "Evans",
    "Fischer",
    "Garcia",
    "Haddad",
    "Ito",
    "Jones",
    "Kowalski",
    "Lopez",
    "Moreau",
    "Novak",
    "Okafor",
    "Patel",
    "Quist",
    "Rossi",
    "Smith",
    "Tanaka",
    "Ueda",
    "Varga",
    "Weber",
    "Young",
]
ADJECTIVES = [
    "Compact",
    "Deluxe",
    "Classic",
    "Eco",
    "Smart",
    "Pocket",
    "Heavy-duty",
    "Mini",
    "Premium",
    "Rustic",
    "Travel",
    "Studio",
]
NOUNS = {
    "Books": ["Atlas", "Cookbook", "Novel", "Field Guide"],
    "Garden": ["Trowel", "Planter", "Hose", "Seed Kit"],
    "Kitchen": ["Kettle", "Skillet", "Grinder", "Knife Set"],
    "Toys": ["Puzzle", "Kite", "Robot", "Board Game"],
    "Tools": ["Drill", "Wrench", "Level", "Saw"],
    "Sports": ["Ball", "Racket", "Mat", "Bottle"],
    "Music": ["Ukulele", "Metronome", "Capo", "Harmonica"],
    "Office": ["Stapler", "Lamp", "Notebook", "Chair"],
}
START = date(2024, 1, 1)
DAYS = 731  # two years of orders
BATCH = 5000


def generate(
    *,
    customers: int,
    products: int,
    orders: int,
    seed: int = 7,
    on_progress: Callable[[int], None] = lambda n: None,
) -> None:
    """Add a dataset of the given size; ids continue after existing rows."""
    rng = random.Random(seed)
    first_customer = (Customer.objects.aggregate(m=Max("id"))["m"] or 0) + 1
    first_product = (Product.objects.aggregate(m=Max("id"))["m"] or 0) + 1
    with transaction.atomic():
        Customer.objects.bulk_create(
            [
                Customer(
                    id=first_customer + i,
                    name=f"{rng.choice(FIRST)} {rng.choice(LAST)}",
                    email=f"customer{first_customer + i}@example.com",
                    region=rng.choices(REGIONS, weights=[5, 4, 3, 3, 2])[0],
                    joined_on=START - timedelta(days=rng.randrange(1500)),
                )
                for i in range(customers)
            ],
            batch_size=BATCH,
        )
        catalogue = []
        for i in range(products):
            category = CATEGORIES[i % len(CATEGORIES)]
            catalogue.append(
                Product(
                    id=first_product + i,
                    sku=f"P{first_product + i:06d}",
                    name=f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS[category])}",
                    category=category,
                    unit_price_cents=rng.randrange(299, 19999),
                )
            )
        Product.objects.bulk_create(catalogue, batch_size=BATCH)
    # Some products come back far more often than others.
    return_rate = {p.id: rng.betavariate(1.2, 18) for p in catalogue}
    prices = {p.id: p.unit_price_cents for p in catalogue}
    product_ids = list(prices)
    # Popular products sell more: a skewed pick.
    popularity = list(accumulate(1 / (rank + 1) ** 0.6 for rank in range(len(product_ids))))
    quantities, quantity_weights = (1, 2, 3, 4, 6), list(accumulate((60, 20, 10, 6, 4)))
    next_order = (Order.objects.aggregate(m=Max("id"))["m"] or 0) + 1
    next_line = (OrderLine.objects.aggregate(m=Max("id"))["m"] or 0) + 1
    customer_ids = range(first_customer, first_customer + customers)

    order_sql = _insert_sql(Order, ["id", "customer_id", "placed_on"])
    line_sql = _insert_sql(
        OrderLine, ["id", "order_id", "product_id", "quantity", "unit_price_cents", "returned"]
    )
    done = 0
    while done < orders:
        size = min(BATCH, orders - done)
        order_rows, line_rows = [], []
        for _ in range(size):
            placed_on = START + timedelta(days=int(rng.triangular(0, DAYS, DAYS)))
            order_rows.append((next_order, rng.choice(customer_ids), placed_on))
            for product_id in rng.choices(product_ids, cum_weights=popularity, k=rng.randint(1, 5)):
                line_rows.append(
                    (
                        next_line,
                        next_order,
                        product_id,
                        rng.choices(quantities, cum_weights=quantity_weights)[0],
                        prices[product_id],
                        rng.random() < return_rate[product_id],
                    )
                )
                next_line += 1
            next_order += 1
        # Plain executemany: model instances cost more than the inserts here.
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(order_sql, order_rows)
            cursor.executemany(line_sql, line_rows)
        done += size
        on_progress(size)
    _reset_sequences()


def _insert_sql(model: type, columns: list[str]) -> str:
    quote = connection.ops.quote_name
    # Table and column names come from the models, never from input.
    return "INSERT INTO {} ({}) VALUES ({})".format(  # noqa: S608
        quote(model._meta.db_table),
        ", ".join(quote(c) for c in columns),
        ", ".join(["%s"] * len(columns)),
    )


def _reset_sequences() -> None:
    """Explicit ids leave PostgreSQL's sequences behind; move them past the data."""
    statements = connection.ops.sequence_reset_sql(no_style(), [Customer, Product, Order, OrderLine])
    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql)
