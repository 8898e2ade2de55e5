from django.conf import settings
from django.db import models


class Upload(models.Model):
    """A CSV file a user uploaded, kept in the database so that any worker
    can import it, and what its import did (set once, when it committed)."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="uploads")
    name = models.CharField(max_length=200)
    data = models.BinaryField()
    size = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)
    # Set in the transaction that saved the customers: a run of the same
    # upload again (its worker died after the commit) imports nothing twice.
    imported_at = models.DateTimeField(null=True, blank=True)
    imported = models.PositiveIntegerField(default=0)
    rejected = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return self.name


class RejectedRow(models.Model):
    """A row the import did not take, with why, to show and download."""

    upload = models.ForeignKey(Upload, on_delete=models.CASCADE, related_name="rejected_rows")
    line = models.PositiveIntegerField()
    reason = models.CharField(max_length=200)
    cells = models.JSONField()

    class Meta:
        ordering = ["line"]

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"
