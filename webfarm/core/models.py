"""The app's tables. Each model names its app: a project that leaves the app
out of INSTALLED_APPS hears so from a check (webfarm.core.needs), not from
a RuntimeError as the model is imported."""

from django.db import models


class Revocation(models.Model):
    """A copy in memcached that stopped being true at `at` (webfarm.core.revocations).

    Rows are written when something that memcached caches changes (a user
    saved, a session ended) and deleted once no copy from before can still
    be read (`until`)."""

    key = models.CharField(max_length=250)
    at = models.FloatField()
    until = models.FloatField(db_index=True)

    class Meta:
        app_label = "webfarm_core"

    def __str__(self) -> str:
        return f"{self.key} at {self.at}"


class PoolChange(models.Model):
    """A change of the memcached pool (webfarm.core.pool): the newest row says
    which servers the farm uses, or which two lists it is between."""

    old = models.TextField()  # comma-separated host:port, as MEMCACHED_SERVERS
    new = models.TextField()
    stage = models.CharField(max_length=16)
    started_at = models.DateTimeField(auto_now_add=True)
    staged_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "webfarm_core"

    def __str__(self) -> str:
        return f"{self.old} -> {self.new} ({self.stage})"


class PoolMember(models.Model):
    """A process that follows the pool: which change and stage it last read,
    and when (a process silent for longer than pool.member_ttl() is gone)."""

    name = models.CharField(max_length=200, unique=True)  # host:pid
    change = models.BigIntegerField()
    stage = models.CharField(max_length=16)
    seen_at = models.DateTimeField(db_index=True)

    class Meta:
        app_label = "webfarm_core"

    def __str__(self) -> str:
        return f"{self.name}: {self.change} {self.stage}"
