"""The library's own test project: the apps as docs/install.md installs
them in a project that is not the demo, and nothing of the demo. mypy's
Django plugin reads the models through it too (pyproject.toml)."""

import json
import os

import webfarm

SECRET_KEY = "webfarm-test-project-key-not-for-production-9f2c7a1e5b3d"
DEBUG = False
ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    *webfarm.APPS,
    "tests.project.shop",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "webfarm.activity.middleware.ActivityLogMiddleware",
    "webfarm.djangotasks.owners.TaskOwnerMiddleware",
]
ROOT_URLCONF = "tests.project.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        # In memory unless a test gives the processes it starts a file
        # (tests/harness/suites.py library_env): nothing is written here.
        "NAME": os.environ.get("WEBFARM_TEST_DATABASE", ":memory:"),
        "OPTIONS": {
            # Processes a test starts share a file: writers queue, readers
            # read beside them, as on any SQLite site with several processes.
            # In-process, the tests' database is Django's in-memory one, whose
            # connections share one cache: there a thread reading a table (the
            # pool's follower) makes another's write fail at once with
            # "database table is locked" unless readers take no table locks.
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA read_uncommitted=1;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
        },
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
STATIC_URL = "static/"
LOGIN_REDIRECT_URL = "/"

# A process a test starts (a worker, a drainer) is told the test's memcached
# and namespace; in-process, tests/conftest.py points these at the test's own.
MEMCACHED = {
    "SERVERS": os.environ.get("WEBFARM_TEST_MEMCACHED", "127.0.0.1:11211").split(","),
    "NAMESPACE": os.environ.get("WEBFARM_TEST_NAMESPACE", "webfarm-tests"),
    # The servers named, not the pool the database names: a test of the
    # pool's changes turns it on (tests/unit/test_pool_plan.py).
    "POOL_FOLLOW": False,
}
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.memcached.PyMemcacheCache",
        "LOCATION": "127.0.0.1:11211",
        "KEY_PREFIX": "webfarm-tests:dj",
    }
}
CELERY_BROKER_URL = "memory://"
TASKS = {"default": {"BACKEND": "webfarm.djangotasks.backend.CeleryBackend"}}
# The machine APIs, mounted (tests/project/urls.py) with their tokens.
QUEUE_API_TOKEN = "test-queue-token"
STATS_API_TOKEN = "test-stats-token"
# Empty: the library's defaults. Tests overlay what they change on them.
PROGRESS: dict = {}
QUEUES: dict = {}
LIMITS: dict = {}
ACTIVITY: dict = {}
SESSION_ENGINE = "webfarm.core.sessions"
AUTHENTICATION_BACKENDS = ["webfarm.limits.backends.ThrottledUserBackend"]

# What a test tells a process it starts, as JSON: settings in place of
# these (QUEUES, a MIDDLEWARE without an entry, INSTALLED_APPS without an app).
globals().update(json.loads(os.environ.get("WEBFARM_TEST_SETTINGS", "{}")))
