"""The project's settings plus one bare view, for the endpoint benchmark's baseline."""

from webfarm.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls"
