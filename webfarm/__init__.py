"""webfarm: job progress and inter-process communication over memcached for
Django farms. Each subpackage is a Django app (labels `webfarm_<app>`), and
each imports only the apps below it: core, queues, broker, progress, stats,
activity, limits, djangotasks, dashboard (CONTRIBUTING.md draws them).

Importing the package starts nothing."""

from importlib.metadata import PackageNotFoundError, version

__all__ = ["APPS"]

# Every app, in the order INSTALLED_APPS takes them: `INSTALLED_APPS += webfarm.APPS`.
# A project may list fewer (CONTRIBUTING.md says which need which).
APPS = [
    "webfarm.core",
    "webfarm.queues",
    "webfarm.broker",
    "webfarm.progress",
    "webfarm.stats",
    "webfarm.activity",
    "webfarm.dashboard",
    "webfarm.djangotasks",
    "webfarm.limits",
]

try:
    __version__ = version("webfarm")
except PackageNotFoundError:  # a copy of the source that pip never installed: no metadata to read
    __version__ = "0+unknown"
