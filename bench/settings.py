"""The project's settings plus the benchmarks' baseline views (bench/urls.py)."""

from demofarm.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls"
