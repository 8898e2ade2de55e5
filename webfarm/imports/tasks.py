from celery import shared_task

from webfarm.imports import services


@shared_task(name="webfarm.imports.purge_uploads", ignore_result=True)
def purge_uploads() -> None:
    services.purge_uploads()
