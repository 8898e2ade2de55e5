from django.db import models


class CounterWatermark(models.Model):
    """How far the harvester has read one memcached counter."""

    key = models.CharField(primary_key=True, max_length=200)
    generation = models.CharField(max_length=16)
    raw = models.BigIntegerField(default=0)
    harvested_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.key} @ {self.raw}"


class CounterSample(models.Model):
    """Increments of one counter within one hour."""

    key = models.CharField(max_length=200)
    hour = models.DateTimeField()
    value = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["key", "hour"], name="one_sample_per_hour")]
        indexes = [models.Index(fields=["hour"])]

    def __str__(self) -> str:
        return f"{self.key} {self.hour:%Y-%m-%d %H}h: {self.value}"


class DailySummary(models.Model):
    key = models.CharField(max_length=200)
    day = models.DateField()
    value = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["key", "day"], name="one_summary_per_day")]

    def __str__(self) -> str:
        return f"{self.key} {self.day}: {self.value}"
