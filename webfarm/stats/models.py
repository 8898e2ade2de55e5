"""The app's tables. Each model names its app: a project that leaves the app
out of INSTALLED_APPS hears so from a check (webfarm.core.needs), not from
a RuntimeError as the model is imported."""

from django.db import models


class CounterWatermark(models.Model):
    """How far the harvester has read one memcached counter."""

    key = models.CharField(primary_key=True, max_length=200)
    generation = models.CharField(max_length=16)
    raw = models.BigIntegerField(default=0)
    harvested_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "webfarm_stats"

    def __str__(self) -> str:
        return f"{self.key} @ {self.raw}"


class CountedValue(models.Model):
    """One counter's increments within one period (hour, day or minute)."""

    key = models.CharField(max_length=200)
    value = models.BigIntegerField(default=0)

    class Meta:
        abstract = True


class CounterSample(CountedValue):
    """Increments of one counter within one hour."""

    hour = models.DateTimeField()

    class Meta:
        app_label = "webfarm_stats"
        constraints = [models.UniqueConstraint(fields=["key", "hour"], name="one_sample_per_hour")]
        indexes = [models.Index(fields=["hour"])]

    def __str__(self) -> str:
        return f"{self.key} {self.hour:%Y-%m-%d %H}h: {self.value}"


class DailySummary(CountedValue):
    day = models.DateField()

    class Meta:
        app_label = "webfarm_stats"
        constraints = [models.UniqueConstraint(fields=["key", "day"], name="one_summary_per_day")]

    def __str__(self) -> str:
        return f"{self.key} {self.day}: {self.value}"


class CounterMinute(CountedValue):
    """Increments of one counter harvested within one minute; kept two days."""

    minute = models.DateTimeField()

    class Meta:
        app_label = "webfarm_stats"
        constraints = [models.UniqueConstraint(fields=["key", "minute"], name="one_sample_per_minute")]
        indexes = [models.Index(fields=["minute"])]

    def __str__(self) -> str:
        return f"{self.key} {self.minute:%Y-%m-%d %H:%M}: {self.value}"
