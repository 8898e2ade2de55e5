"""webfarm: job progress and inter-process communication over memcached for
Django farms. Each subpackage is a Django app (labels `webfarm_<app>`), and
each imports only the apps below it: core, queues, broker, progress, stats,
activity, limits, djangotasks, dashboard (docs/architecture.md draws them).

Importing the package starts nothing."""

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("webfarm")
except PackageNotFoundError:  # a copy of the source that pip never installed: no metadata to read
    __version__ = "0+unknown"
