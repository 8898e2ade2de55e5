"""Project settings. Every environment variable is read here, once, with a default."""

from pathlib import Path

import dj_database_url

from webfarm.env import (
    env_bool,
    env_float,
    env_int,
    env_int_map,
    env_list,
    env_str,
    key_file,
    old_names_in_use,
)

BASE_DIR = Path(__file__).resolve().parent.parent

# DJANGO_SECRET_KEY, else this machine's own key (DJANGO_SECRET_KEY_FILE, made on
# first use): `make run`, every manage.py command and a celery started by hand
# then agree. A farm across machines sets the variable (webfarm.secret refuses
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
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.humanize",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "core",
    "progress",
    "reports",
    "queues",
    "stats",
    "activity",
    "dashboard",
    "limits",
    "polls",
    "imports",
    # The project itself: its management commands (seed_demo).
    "webfarm",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "activity.middleware.ActivityLogMiddleware",
]

ROOT_URLCONF = "webfarm.urls"
WSGI_APPLICATION = "webfarm.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
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

MEMCACHED_SERVERS = env_list("MEMCACHED_SERVERS", "127.0.0.1:11211")
MEMCACHED_NAMESPACE = env_str("MEMCACHED_NAMESPACE", "webfarm")

# Django's own cache (sessions) lives in the same memcached, under its own
# sub-namespace. It is a cache: when memcached is away it misses and the
# sessions fall back to the database. It never unpickles (core.cache),
# and the sessions it holds are keyed by an HMAC and signed (core.sessions).
CACHES = {
    "default": {
        "BACKEND": "core.cache.StablePyMemcacheCache",
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
SESSION_ENGINE = "core.sessions"
# Seconds a session read from the database stays cached: an active user costs
# one query per period, and a login pins no memcached memory for longer.
SESSION_CACHE_TTL = env_int("SESSION_CACHE_TTL", 600)

MEMCACHED = {
    "SERVERS": MEMCACHED_SERVERS,
    "NAMESPACE": MEMCACHED_NAMESPACE,
    "CONNECT_TIMEOUT": env_float("MEMCACHED_CONNECT_TIMEOUT", 0.5),
    "TIMEOUT": env_float("MEMCACHED_TIMEOUT", 2.0),
    "DOWN_AFTER": env_int("MEMCACHED_DOWN_AFTER", 1),
    "RETRY_DOWN": env_float("MEMCACHED_RETRY_DOWN", 1.0),
}

PROGRESS = {
    "FLUSH_INTERVAL": env_float("PROGRESS_FLUSH_INTERVAL", 0.25),
    "HEARTBEAT_INTERVAL": env_float("PROGRESS_HEARTBEAT_INTERVAL", 5.0),
    "LOST_AFTER_BEATS": env_int("PROGRESS_LOST_AFTER_BEATS", 3),
    "RECORD_TTL": env_int("PROGRESS_RECORD_TTL", 24 * 3600),
    "FINAL_TTL": env_int("PROGRESS_FINAL_TTL", 300),
    "KEEP_DAYS": env_int("PROGRESS_KEEP_DAYS", 30),
    "SEND_GRACE": env_float("PROGRESS_SEND_GRACE", 30.0),
    "RESEND_AFTER": env_float("PROGRESS_RESEND_AFTER", 120.0),
    "QUEUED_LOST_AFTER": env_float("PROGRESS_QUEUED_LOST_AFTER", 1800.0),
    "JOBS_PER_USER": env_int("PROGRESS_JOBS_PER_USER", 2),
    "JOBS_PER_KIND": env_int("PROGRESS_JOBS_PER_KIND", 4),
}

QUEUES = {
    "MAX_MESSAGE_BYTES": env_int("QUEUES_MAX_MESSAGE_BYTES", 64 * 1024),
    "VISIBILITY_TIMEOUT": env_int("QUEUES_VISIBILITY_TIMEOUT", 60),
    "HOLE_WAIT": env_float("QUEUES_HOLE_WAIT", 2.0),
    "RECOVER_INTERVAL": env_float("QUEUES_RECOVER_INTERVAL", 1.0),
    "PREFETCH": env_int("QUEUES_PREFETCH", 8),
    "MIRRORS": env_list("QUEUES_MIRRORS", ""),
    "MAX_DELIVERIES": env_int("QUEUES_MAX_DELIVERIES", 5),
    "FINISHED_TTL": env_int("QUEUES_FINISHED_TTL", 3600),
    "HOLE_TTL": env_int("QUEUES_HOLE_TTL", 600),
    "DEAD_LETTER_TTL": env_int("QUEUES_DEAD_LETTER_TTL", 7 * 24 * 3600),
    "HTTP_MAX_QUEUES": env_int("QUEUES_HTTP_MAX_QUEUES", 100),
    "HTTP_IDLE_AFTER": env_int("QUEUES_HTTP_IDLE_AFTER", 24 * 3600),
    "HTTP_MAX_MESSAGES": env_int("QUEUES_HTTP_MAX_MESSAGES", 10_000),
    "HTTP_MAX_BYTES": env_int("QUEUES_HTTP_MAX_BYTES", 1024 * 1024),
    "HTTP_MAX_TOTAL_BYTES": env_int("QUEUES_HTTP_MAX_TOTAL_BYTES", 8 * 1024 * 1024),
}

LIMITS = {
    "REPORTS_PER_USER": env_int("LIMITS_REPORTS_PER_USER", 2),
    "REPORTS_PER_KIND": env_int("LIMITS_REPORTS_PER_KIND", 4),
    "DOWNLOADS": env_int("LIMITS_DOWNLOADS", 16),
    "DOWNLOADS_PER_USER": env_int("LIMITS_DOWNLOADS_PER_USER", 2),
    # Quick tries before a refusal, the first pause between them (grows linearly).
    "VOTES": env_int("LIMITS_VOTES", 64),
    "ATTEMPTS": env_int("LIMITS_ATTEMPTS", 3),
    "PAUSE": env_float("LIMITS_PAUSE", 0.001),
    "LOGIN_FAILURES": env_int("LIMITS_LOGIN_FAILURES", 10),
    "LOGIN_FAILURES_PER_ADDRESS": env_int("LIMITS_LOGIN_FAILURES_PER_ADDRESS", 50),
    "LOGIN_WINDOW": env_int("LIMITS_LOGIN_WINDOW", 300),
}

POLLS = {
    "ANONYMOUS_PER_ADDRESS": env_int("POLLS_ANONYMOUS_PER_ADDRESS", 20),
    "ANONYMOUS_WINDOW": env_int("POLLS_ANONYMOUS_WINDOW", 3600),
    "MARKER_TTL": env_int("POLLS_MARKER_TTL", 24 * 3600),
    "TOTALS_TTL": env_int("POLLS_TOTALS_TTL", 24 * 3600),
}

DASHBOARD = {
    "WORKER_HEARTBEAT": env_float("DASHBOARD_WORKER_HEARTBEAT", 10.0),
    "CHART_TTL": env_int("DASHBOARD_CHART_TTL", 30),
}

IMPORTS = {
    "MAX_UPLOAD_BYTES": env_int("IMPORTS_MAX_UPLOAD_BYTES", 5 * 1024 * 1024),
    "MAX_ROWS": env_int("IMPORTS_MAX_ROWS", 50_000),
    "KEEP_DAYS": env_int("IMPORTS_KEEP_DAYS", 30),
}

REPORTS = {
    # Per report type, seconds: "sales-by-region=600,top-customers=300".
    "TIME_LIMITS": env_int_map("REPORTS_TIME_LIMITS"),
    "CHUNK_ROWS": env_int("REPORTS_CHUNK_ROWS", 2000),
    "PART_ROWS": env_int("REPORTS_PART_ROWS", 100_000),
    "MAX_PARTS": env_int("REPORTS_MAX_PARTS", 16),
    "RESULT_CHUNK_BYTES": env_int("REPORTS_RESULT_CHUNK_BYTES", 512 * 1024),
}

# Machine API tokens (queue front, stats endpoints); empty means "refuse all".
QUEUE_API_TOKEN = env_str("QUEUE_API_TOKEN", "")
# Balancers whose X-Forwarded-For is believed (the client's address for the polls' limit).
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES", "")
STATS_API_TOKEN = env_str("STATS_API_TOKEN", "")

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
# Periodic work: run one beat (`celery -A webfarm beat`, or the worker's -B).
ACTIVITY_LOG_FILE = env_str("ACTIVITY_LOG_FILE", str(BASE_DIR / "var" / "activity.log"))
ACTIVITY = {
    # Answered polls are counted, not logged; this fraction is logged all the same.
    "POLL_SAMPLE": env_float("ACTIVITY_POLL_SAMPLE", 0.0),
}

REAP_EVERY = env_float("REAP_EVERY", 5.0)
CELERY_BEAT_SCHEDULE = {
    "drain-sitelog": {"task": "activity.drain_sitelog", "schedule": env_float("ACTIVITY_DRAIN_EVERY", 5.0)},
    # Reaping runs on any worker; while none is up, the sends expire instead of piling up.
    "reap-lost-jobs": {
        "task": "progress.reap_lost_jobs",
        "schedule": REAP_EVERY,
        "options": {"expires": 2 * REAP_EVERY},
    },
    "flush-votes": {
        "task": "polls.flush_votes",
        "schedule": env_float("POLLS_FLUSH_EVERY", 2.0),
        "options": {"expires": 10},
    },
    "forget-idle-http-queues": {
        "task": "queues.forget_idle",
        "schedule": 300.0,
        "options": {"expires": 300},
    },
    "harvest-counters": {
        "task": "stats.harvest_counters",
        "schedule": env_float("STATS_HARVEST_EVERY", 60.0),
    },
    # What a farm keeps is bounded: ended jobs, uploads and expired sessions go.
    "purge-ended-jobs": {
        "task": "progress.purge_ended_jobs",
        "schedule": 3600.0,
        "options": {"expires": 3600},
    },
    "purge-uploads": {"task": "imports.purge_uploads", "schedule": 3600.0, "options": {"expires": 3600}},
    "clear-expired-sessions": {
        "task": "core.clear_expired_sessions",
        "schedule": 3600.0,
        "options": {"expires": 3600},
    },
}
if QUEUES["MIRRORS"]:
    CELERY_BEAT_SCHEDULE["repair-queue-mirrors"] = {"task": "queues.repair_mirrors", "schedule": 30.0}

# Users are read from memcached (sealed, dropped on every node when saved),
# not from the database on every request (core.users).
AUTHENTICATION_BACKENDS = ["core.users.CachedUserBackend"]
# Seconds a cached user lives: bounds what an update() (which tells no one) leaves stale.
USER_CACHE_TTL = env_int("USER_CACHE_TTL", 300)

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
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "filters": {"quiet_housekeeping": {"()": "webfarm.logfilters.QuietHousekeeping"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["quiet_housekeeping"],
        },
        # Every node ships its activity into memcached; one drainer writes the file.
        "sitelog": {"class": "activity.handler.SiteLogHandler"},
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "matplotlib": {"level": "WARNING"},
        "activity": {"handlers": ["sitelog"], "level": "INFO", "propagate": False},
    },
}

# Environment variables set under their names from before the rename (core.checks warns).
OLD_ENVIRONMENT_NAMES = old_names_in_use()
