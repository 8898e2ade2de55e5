from django.conf import settings
from django.db import models
from django.utils import timezone


class Poll(models.Model):
    question = models.CharField(max_length=200)
    is_open = models.BooleanField(default=True, help_text="Closed polls show results but take no votes.")
    ends_at = models.DateTimeField(null=True, blank=True, help_text="Votes stop at this time, if set.")
    created_at = models.DateTimeField(auto_now_add=True)
    # Set by save() when is_open goes off: a vote queued before it is stored,
    # one cast later (a node that believed an old copy of the poll) is not.
    closed_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.question

    def save(self, *args, **kwargs) -> None:
        if self.is_open:
            self.closed_at = None
        elif self.closed_at is None:
            self.closed_at = timezone.now()
        fields = kwargs.get("update_fields")
        if fields is not None and "is_open" in fields:
            kwargs["update_fields"] = {*fields, "closed_at"}
        super().save(*args, **kwargs)

    def accepts_votes(self, now=None) -> bool:
        now = now or timezone.now()
        return self.is_open and (self.ends_at is None or now < self.ends_at)

    def accepted_votes_at(self, when) -> bool:
        """Whether a vote cast at `when` (a datetime) was cast while the poll was open."""
        still_open = self.is_open or (self.closed_at is not None and when < self.closed_at)
        return still_open and (self.ends_at is None or when < self.ends_at)


class Choice(models.Model):
    poll = models.ForeignKey(Poll, on_delete=models.CASCADE, related_name="choices")
    text = models.CharField(max_length=200)
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["position", "id"]

    def __str__(self) -> str:
        return self.text


class Vote(models.Model):
    """One accepted vote. Its id is made when the vote is cast, so writing it
    twice (a flush interrupted, a queue message delivered again) stores it once."""

    id = models.CharField(primary_key=True, max_length=32)
    poll = models.ForeignKey(Poll, on_delete=models.CASCADE, related_name="votes")
    choice = models.ForeignKey(Choice, on_delete=models.CASCADE, related_name="votes")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    # "u:<user id>" or "a:<anonymous voter id from the signed cookie>".
    voter = models.CharField(max_length=64)
    address = models.GenericIPAddressField(null=True, blank=True)
    cast_at = models.DateTimeField()
    # "queue": through memcached; "direct": written here while memcached was away.
    via = models.CharField(max_length=8, default="queue")
    # In memcached's running totals. Not yet: written directly while memcached
    # was away, or cast while the totals were being rebuilt; the flusher counts it.
    counted = models.BooleanField(default=True)

    class Meta:
        indexes = [models.Index(fields=["poll", "choice"])]
        # One vote per voter, whatever memcached forgot: a second one is dropped at flush.
        constraints = [models.UniqueConstraint(fields=["poll", "voter"], name="one_vote_per_voter")]

    def __str__(self) -> str:
        return f"{self.voter} -> {self.choice_id}"
