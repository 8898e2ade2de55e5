from django.db import models

REGIONS = ["North", "South", "East", "West", "Central"]
CATEGORIES = ["Books", "Garden", "Kitchen", "Toys", "Tools", "Sports", "Music", "Office"]


class Customer(models.Model):
    name = models.CharField(max_length=100)
    email = models.EmailField()
    region = models.CharField(max_length=16, choices=[(r, r) for r in REGIONS], db_index=True)
    joined_on = models.DateField()

    def __str__(self) -> str:
        return self.name


class Product(models.Model):
    sku = models.CharField(max_length=16, unique=True)
    name = models.CharField(max_length=100)
    category = models.CharField(max_length=16, choices=[(c, c) for c in CATEGORIES], db_index=True)
    unit_price_cents = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"{self.sku} {self.name}"


class Order(models.Model):
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="orders")
    placed_on = models.DateField(db_index=True)

    def __str__(self) -> str:
        return f"order {self.pk}"


class OrderLine(models.Model):
    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="lines")
    product = models.ForeignKey(Product, on_delete=models.CASCADE, related_name="lines")
    quantity = models.PositiveIntegerField()
    unit_price_cents = models.PositiveIntegerField()
    returned = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"line {self.pk} of order {self.order_id}"


class ResultFile(models.Model):
    """A file a job produced, kept in the database so every node can serve it.

    The bytes are split over ResultChunk rows so neither writing nor serving
    ever holds a whole large file in memory.
    """

    job = models.ForeignKey("webfarm_progress.Job", on_delete=models.CASCADE, related_name="files")
    name = models.CharField(max_length=100)
    content_type = models.CharField(max_length=100)
    size = models.BigIntegerField(default=0)
    chunks = models.PositiveIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True)
    complete = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "name"], name="one_file_per_name")]
        ordering = ["id"]

    def __str__(self) -> str:
        return self.name


class ResultChunk(models.Model):
    file = models.ForeignKey(ResultFile, on_delete=models.CASCADE, related_name="parts")
    seq = models.PositiveIntegerField()
    data = models.BinaryField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["file", "seq"], name="one_chunk_per_seq")]

    def __str__(self) -> str:
        return f"chunk {self.seq} of file {self.file_id}"
