from demofarm.imports import services
from webfarm.core.tasks import renamed_task


def _purge_uploads() -> None:
    services.purge_uploads()


# Also under its name while imports were in the library.
purge_uploads = renamed_task(
    _purge_uploads,
    "demofarm.imports.purge_uploads",
    was=("webfarm.imports.purge_uploads",),
    ignore_result=True,
)
