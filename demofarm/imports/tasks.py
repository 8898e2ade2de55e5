from celery import shared_task

from demofarm.imports import services


def _purge_uploads() -> None:
    services.purge_uploads()


purge_uploads = shared_task(_purge_uploads, name="demofarm.imports.purge_uploads", ignore_result=True)
