"""What a task that takes a context gets: Django's TaskContext, with the
metadata API proposed for Django (django/new-features #141) and our
reporter for a bar with stages, counts and an ETA."""

from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async

from webfarm.djangotasks.compat import TaskContext
from webfarm.progress.reporter import ProgressReporter


# Django's TaskContext is a frozen dataclass too; its stubs do not say so.
@dataclass(frozen=True, slots=True, kw_only=True)
class ProgressContext(TaskContext):  # type: ignore[misc]
    reporter: ProgressReporter
    # The task's metadata, a JSON object of at most 4 KiB: change it, then
    # save_metadata() to publish it. A plain attribute, as `progress` is: a
    # body may update and save on every step, and a property costs each one.
    metadata: dict[str, Any] = field(init=False)
    # The bar: progress.plan(), .stage(), .update() (see webfarm.progress.api).
    progress: ProgressReporter = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", self.reporter.metadata)
        object.__setattr__(self, "progress", self.reporter)

    def save_metadata(self) -> None:
        """Publish `metadata` to every reader (get_result on any node, the
        bar's poll). Cheap: coalesced with the progress writes, at most one
        per PROGRESS_FLUSH_INTERVAL (or half a heartbeat, if the task does
        not save or update again); the last one always lands. Metadata that
        is not small JSON is refused when it is written: the save that
        writes it raises ValueError. Also raises JobCancelled when the task
        was cancelled: let it propagate."""
        self.reporter.save_metadata()

    async def asave_metadata(self) -> None:
        await sync_to_async(self.save_metadata)()
