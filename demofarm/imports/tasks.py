from celery import shared_task

from demofarm.imports import services


def _purge_uploads() -> None:
    services.purge_uploads()


purge_uploads = shared_task(name="demofarm.imports.purge_uploads", ignore_result=True)(_purge_uploads)
# Its name while imports were in the library: one sent before an upgrade still runs.
shared_task(name="webfarm.imports.purge_uploads", ignore_result=True)(_purge_uploads)
