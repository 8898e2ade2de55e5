# As Celery's Django guide has it: the app is made when Django loads.
from tests.project.celery import app as celery_app

__all__ = ["celery_app"]
