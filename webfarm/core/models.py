from django.db import models


class Revocation(models.Model):
    """A copy in memcached that stopped being true at `at` (webfarm.core.revocations).

    Rows are written when something that memcached caches changes (a user
    saved, a session ended) and deleted once no copy from before can still
    be read (`until`)."""

    key = models.CharField(max_length=250)
    at = models.FloatField()
    until = models.FloatField(db_index=True)

    def __str__(self) -> str:
        return f"{self.key} at {self.at}"
