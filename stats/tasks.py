from celery import shared_task
from django.core.management import call_command


@shared_task(name="stats.harvest_counters", ignore_result=True)
def harvest_counters() -> None:
    call_command("harvest_counters", verbosity=0)
