from celery import shared_task

from webfarm.queues import front
from webfarm.queues.conf import get_config
from webfarm.queues.mirror import mirrored_client, repair


@shared_task(name="webfarm.queues.repair_mirrors", ignore_result=True)
def repair_mirrors() -> list[str]:
    """Periodic: bring a returned mirror back into sync (a no-op otherwise)."""
    mirrors = get_config()["MIRRORS"]
    return repair(mirrored_client(mirrors)) if len(mirrors) == 2 else []


@shared_task(name="webfarm.queues.forget_idle", ignore_result=True)
def forget_idle() -> list[str]:
    """Periodic: forget the HTTP front's queues that are idle and empty."""
    return front.forget_idle()
