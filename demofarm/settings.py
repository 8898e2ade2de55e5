"""Project settings. Every environment variable is read here, once, with a default."""

from pathlib import Path

import dj_database_url

from demofarm.env import (
    env_app,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_str,
    key_file,
)
from demofarm.imports import conf as imports_conf
from demofarm.polls import conf as polls_conf
from demofarm.reports import conf as reports_conf
from webfarm.activity import conf as activity_conf
from webfarm.core import beat
from webfarm.core import conf as memcached_conf
from webfarm.dashboard import conf as dashboard_conf
from webfarm.limits import conf as limits_conf
from webfarm.progress import conf as progress_conf
from webfarm.queues import conf as queues_conf

BASE_DIR = Path(__file__).resolve().parent.parent

# DJANGO_SECRET_KEY, else this machine's own key (DJANGO_SECRET_KEY_FILE, made on
# first use): `make run`, every manage.py command and a celery started by hand
# then agree. A farm across machines sets the variable (demofarm.secret refuses
# to start without it). The dev key is only what is left where the file can be
# neither read nor made; the processes refuse it with DEBUG off.
DEV_SECRET_KEY = "dev-only-insecure-key-change-me-in-production-0123456789"  # noqa: S105
SECRET_KEY_FILE = Path(env_str("DJANGO_SECRET_KEY_FILE", str(BASE_DIR / "var" / "secret_key")))
SECRET_KEY_FROM_FILE = not env_str("DJANGO_SECRET_KEY", "")
SECRET_KEY = env_str("DJANGO_SECRET_KEY", "") or key_file(SECRET_KEY_FILE, DEV_SECRET_KEY)
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", "")
SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE

INSTALLED_APPS = [
    # The site first: its templates override the apps' and the admin's.
    "demofarm",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.humanize",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "webfarm.core",
    "webfarm.progress",
    "demofarm.reports",
    "webfarm.queues",
    "webfarm.broker",
    "webfarm.stats",
    "webfarm.activity",
    "webfarm.dashboard",
    "webfarm.limits",
    "demofarm.polls",
    "demofarm.imports",
    "webfarm.djangotasks",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "demofarm.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "webfarm.activity.middleware.ActivityLogMiddleware",
    # Tasks a view enqueues (django.tasks) belong to its signed-in user.
    "webfarm.djangotasks.owners.TaskOwnerMiddleware",
]

# Every page's scripts, styles, images and requests come from the site itself
# (demofarm/csp.py): nothing inline, nothing evaluated, no other origin.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)

# Django's Tasks API (django.tasks) runs tasks as jobs on the Celery workers.
TASKS = {"default": {"BACKEND": "webfarm.djangotasks.backend.CeleryBackend"}}

ROOT_URLCONF = "demofarm.urls"
WSGI_APPLICATION = "demofarm.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# SQLite by default; a farm sets DATABASE_URL to PostgreSQL.
DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web processes and workers share the file: WAL lets readers run beside a
    # writer, IMMEDIATE makes writers queue on the busy timeout instead of
    # failing with "database is locked" on lock upgrade.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Each app's settings: its declared defaults, or their variables (PROGRESS_FLUSH_INTERVAL
# feeds PROGRESS["FLUSH_INTERVAL"]); docs/configuration.md lists them.
MEMCACHED = env_app(memcached_conf.get_config)
PROGRESS = env_app(progress_conf.get_config)
QUEUES = env_app(queues_conf.get_config)
LIMITS = env_app(limits_conf.get_config)
POLLS = env_app(polls_conf.get_config)
DASHBOARD = env_app(dashboard_conf.get_config)
IMPORTS = env_app(imports_conf.get_config)
REPORTS = env_app(reports_conf.get_config)
ACTIVITY = env_app(activity_conf.get_config)

MEMCACHED_SERVERS = MEMCACHED["SERVERS"]
MEMCACHED_NAMESPACE = MEMCACHED["NAMESPACE"]

# Django's own cache (sessions) lives in the same memcached, under its own
# sub-namespace. It is a cache: when memcached is away it misses and the
# sessions fall back to the database. It never unpickles (webfarm.core.cache),
# and the sessions it holds are keyed by an HMAC and signed (webfarm.core.sessions).
CACHES = {
    "default": {
        "BACKEND": "webfarm.core.cache.StablePyMemcacheCache",
        "LOCATION": MEMCACHED_SERVERS,
        "KEY_PREFIX": f"{MEMCACHED_NAMESPACE}:dj",
        "TIMEOUT": 3600,
        "OPTIONS": {
            "ignore_exc": True,
            "connect_timeout": 0.5,
            "timeout": 1.0,
            "use_pooling": True,
        },
    }
}
SESSION_ENGINE = "webfarm.core.sessions"
# Seconds a session read from the database stays cached: an active user costs
# one query per period, and a login pins no memcached memory for longer.
SESSION_CACHE_TTL = env_int("SESSION_CACHE_TTL", memcached_conf.SESSION_CACHE_TTL)

# Machine API tokens (queue front, stats endpoints); empty means "refuse all".
QUEUE_API_TOKEN = env_str("QUEUE_API_TOKEN", "")
STATS_API_TOKEN = env_str("STATS_API_TOKEN", "")
# Balancers whose X-Forwarded-For is believed (the client's address for the polls' limit).
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES", "")

# By default the farm's own memcached is the broker: a small farm needs nothing else.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "memcached://")
# Redis hands an unacknowledged task to another worker after this long: it must
# exceed the longest report's time limit, or a long job would run twice.
CELERY_BROKER_TRANSPORT_OPTIONS: dict = {"visibility_timeout": 2 * 3600}
if CELERY_BROKER_URL.startswith("memcached://"):
    # kombu cannot parse a list of hosts: the transport takes them as an option.
    # memcached:// alone means the MEMCACHED_SERVERS.
    _hosts = [h for h in CELERY_BROKER_URL.removeprefix("memcached://").strip("/").split(",") if h]
    _broker_servers = _hosts or MEMCACHED_SERVERS
    CELERY_BROKER_URL = f"memcached://{_broker_servers[0]}"
    # Claims are kept alive while a worker holds them, so this is how soon a
    # killed worker's tasks come back, not a limit on task length.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "servers": _broker_servers,
        "visibility_timeout": env_int("CELERY_BROKER_VISIBILITY_TIMEOUT", 60),
        # A connection is made only once memcached answers (the transport asks).
        # A sender (a web request) tries three times within a second, as Celery's
        # publish retries do, then answers 503; a worker retries with Celery's
        # own back-off (broker_connection_max_retries), whatever these say.
        "max_retries": 2,
        "interval_start": 0,
        "interval_step": 0.2,
        "interval_max": 0.2,
    }
# Celery reads CELERY_BROKER_URL from the environment itself, ahead of these
# settings, and kombu cannot parse the memcached forms above (no host, or a
# list): it would fall back to localhost. The read and write URLs it uses come
# from these settings, unless the environment names them too.
CELERY_BROKER_READ_URL = CELERY_BROKER_WRITE_URL = CELERY_BROKER_URL
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_TASK_DEFAULT_QUEUE", "webfarm")
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# A report is long: take one at a time and acknowledge it when done, so a
# worker that dies hands its job back instead of losing it.
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_CONCURRENCY = env_int("CELERY_WORKER_CONCURRENCY", 2)
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Celery closes the database connections after every task unless this is set
# (celery.fixups.django): a new PostgreSQL connection for each task was a third
# of a short task's run. Kept, they are closed every 2 x this many tasks, and
# demofarm/celery.py checks them at each task as Django does at each request
# (CONN_MAX_AGE, conn_health_checks).
CELERY_DB_REUSE_MAX = env_int("CELERY_DB_REUSE_MAX", 100)

# The one drainer's file (beat's drain-sitelog) of what every node logs.
ACTIVITY_LOG_FILE = env_str("ACTIVITY_LOG_FILE", str(BASE_DIR / "var" / "activity.log"))

# Periodic work: run one beat (`celery -A demofarm beat`, or the worker's -B).
REAP_EVERY = env_float("REAP_EVERY", 5.0)
CELERY_BEAT_SCHEDULE = {
    # The library's: reaping, purging ended jobs and sessions, the site log, the counters.
    **beat.schedule(
        INSTALLED_APPS,
        reap_every=REAP_EVERY,
        drain_every=env_float("ACTIVITY_DRAIN_EVERY", 5.0),
        harvest_every=env_float("STATS_HARVEST_EVERY", 60.0),
        mirrors=bool(QUEUES["MIRRORS"]),
    ),
    # The site's own.
    "flush-votes": {
        "task": "demofarm.polls.flush_votes",
        "schedule": env_float("POLLS_FLUSH_EVERY", 2.0),
        "options": {"expires": 10},
    },
    "purge-uploads": {
        "task": "demofarm.imports.purge_uploads",
        "schedule": 3600.0,
        "options": {"expires": 3600},
    },
}
# Beat's tasks on a queue of their own, for a worker of its own: where long
# reports may keep every worker busy, a flush or a reap waits behind them, and
# queued votes wait in memcached (lost with it, unmirrored) until a flush runs.
# Empty: the default queue, which every worker serves.
HOUSEKEEPING_QUEUE = env_str("HOUSEKEEPING_QUEUE", "")
if HOUSEKEEPING_QUEUE:
    CELERY_TASK_ROUTES = {
        entry["task"]: {"queue": HOUSEKEEPING_QUEUE} for entry in CELERY_BEAT_SCHEDULE.values()
    }

# Users are read from memcached (sealed, dropped on every node when saved),
# not from the database on every request (webfarm.core.users).
# Users cached in memcached; every password try counted before it is hashed.
AUTHENTICATION_BACKENDS = ["webfarm.limits.backends.ThrottledUserBackend"]
# Seconds a cached user lives: bounds what an update() (which tells no one) leaves stale.
USER_CACHE_TTL = env_int("USER_CACHE_TTL", memcached_conf.USER_CACHE_TTL)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "filters": {"quiet_housekeeping": {"()": "demofarm.logfilters.QuietHousekeeping"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["quiet_housekeeping"],
        },
        # Every node ships its activity into memcached; one drainer writes the file.
        "sitelog": {"class": "webfarm.activity.handler.SiteLogHandler"},
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "matplotlib": {"level": "WARNING"},
        "activity": {"handlers": ["sitelog"], "level": "INFO", "propagate": False},
    },
}
