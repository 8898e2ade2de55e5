"""The library's own test project: the apps as docs/install.md installs
them in a project that is not the demo, and nothing of the demo. mypy's
Django plugin reads the models through it too (pyproject.toml)."""

from pathlib import Path

import webfarm

BASE_DIR = Path(__file__).resolve().parent

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
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": BASE_DIR / "db.sqlite3"}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
STATIC_URL = "static/"

MEMCACHED = {"SERVERS": ["127.0.0.1:11211"], "NAMESPACE": "webfarm-tests"}
CELERY_BROKER_URL = "memcached://127.0.0.1:11211"
TASKS = {"default": {"BACKEND": "webfarm.djangotasks.backend.CeleryBackend"}}
SESSION_ENGINE = "webfarm.core.sessions"
AUTHENTICATION_BACKENDS = ["webfarm.limits.backends.ThrottledUserBackend"]
