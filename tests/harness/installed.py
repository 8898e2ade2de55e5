"""A Django project this repository did not write, using the apps from the
wheel alone: `django-admin startproject`, then the steps docs/install.md
gives, and a `shop` app with a task that reports progress. The repository
is never on the project's path: what it runs comes from the wheel, installed
with PyPI's `progress` (a terminal progress-bar library) beside it.
"""

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.harness import processes

APPS = [
    "webfarm.core",
    "webfarm.queues",
    "webfarm.broker",
    "webfarm.progress",
    "webfarm.stats",
    "webfarm.activity",
    "webfarm.dashboard",
    "webfarm.djangotasks",
]

# PyPI's own `progress`, a popular package whose top-level name the library
# once took: the project has it too (pip checks the hash).
PYPI_PROGRESS = (
    "progress==1.6.1 --hash=sha256:5239f22f305c12fdc8ce6e0e47f70f21622a935e16eafc4535617112e7c7ea0b"
)

# Appended to the settings startproject wrote: the steps of docs/install.md,
# plus what any project sets for itself (its database, hosts, static files).
SETTINGS = """
import os

INSTALLED_APPS += {apps!r} + ["shop"]
MIDDLEWARE.insert(1, "whitenoise.middleware.WhiteNoiseMiddleware")
MIDDLEWARE += [
    "webfarm.activity.middleware.ActivityLogMiddleware",
    "webfarm.djangotasks.owners.TaskOwnerMiddleware",
]
TASKS = {{"default": {{"BACKEND": "webfarm.djangotasks.backend.CeleryBackend"}}}}
from webfarm.core.beat import schedule
CELERY_BEAT_SCHEDULE = schedule(INSTALLED_APPS)
MEMCACHED = {{"SERVERS": [os.environ["SITE_MEMCACHED"]]}}
CELERY_BROKER_URL = "memcached://" + os.environ["SITE_MEMCACHED"]
SESSION_ENGINE = "webfarm.core.sessions"
AUTHENTICATION_BACKENDS = ["webfarm.core.users.CachedUserBackend"]

DATABASES["default"]["NAME"] = os.environ["SITE_DB"]
ALLOWED_HOSTS = ["127.0.0.1"]
STATIC_ROOT = BASE_DIR / "static"
LOGIN_REDIRECT_URL = "/"
ACTIVITY_LOG_FILE = BASE_DIR / "activity.log"
LOGGING = {{
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {{"sitelog": {{"class": "webfarm.activity.handler.SiteLogHandler"}}}},
    "loggers": {{"activity": {{"handlers": ["sitelog"], "level": "INFO", "propagate": False}}}},
}}
"""

# Appended to the wsgi.py startproject wrote: the polls answered before the middleware chain.
WSGI = """
from webfarm.progress.pollgate import PollGate  # after the apps are loaded
application = PollGate(application)
"""

CELERY = """
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")
app = Celery("mysite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
"""

URLS = """
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from shop import views

urlpatterns = [
    path("admin/dashboard/", include("webfarm.dashboard.urls")),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("progress/", include("webfarm.progress.urls")),
    path("", views.home, name="home"),
    path("start/", views.start, name="start"),
    path("watch/<str:result_id>/", views.watch, name="watch"),
    path("result/<str:result_id>/", views.result, name="result"),
]
"""

TASKS = """
import time

from webfarm.djangotasks import task


@task(takes_context=True)
def crunch(context, steps: int, pause: float):
    context.progress.stage("crunching", total=steps)
    for done in range(1, steps + 1):
        time.sleep(pause)
        context.progress.update(done)
        context.metadata["done"] = done
        context.save_metadata()
    return {"crunched": steps}
"""

VIEWS = """
from django.contrib.auth.decorators import login_required
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from webfarm.progress.api import Job
from shop.tasks import crunch


def own_result(request, result_id):
    # The Tasks API has no user: the view checks that the task is the user's.
    if not Job.objects.filter(pk=result_id, owner=request.user).exists():
        raise Http404("No such task.")
    return crunch.get_result(result_id)


@login_required
def home(request):
    return render(request, "shop/home.html")


@require_POST
@login_required
def start(request):
    result = crunch.enqueue(int(request.POST["steps"]), float(request.POST["pause"]))
    return redirect("watch", result.id)


@login_required
def watch(request, result_id):
    return render(request, "shop/watch.html", {"result": own_result(request, result_id)})


@login_required
def result(request, result_id):
    found = own_result(request, result_id)
    return JsonResponse({
        "status": found.status,
        "value": found.return_value if found.status == "SUCCESSFUL" else None,
        "metadata": found.metadata,
        "errors": [error.exception_class_path for error in found.errors],
    })
"""

TEMPLATES = {
    "shop/home.html": """<!doctype html><title>Shop</title>
<form method="post" action="/start/">{% csrf_token %}
  <input name="steps" value="40"><input name="pause" value="0.1"><button>Crunch</button>
</form>""",
    "shop/watch.html": """{% load webfarm_progress %}<!doctype html><html><head><title>Crunching</title>
{% progress_assets %}</head><body><h1>Crunching</h1>{% progress_bar result %}</body></html>""",
    "registration/login.html": """<!doctype html><title>Log in</title>
<form method="post">{% csrf_token %}{{ form.as_p }}<button>Log in</button></form>""",
}


def build_wheel(out: Path) -> Path:
    """`pip wheel .` of this repository, into `out`. It is built from a copy:
    setuptools writes build/ and *.egg-info into the tree it builds, which
    two builds at once (xdist workers, the two legs) would share."""
    source = out / "source"
    shutil.copytree(
        processes.ROOT / "webfarm", source / "webfarm", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    shutil.copy(processes.ROOT / "pyproject.toml", source)
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*pip, str(source), "-w", str(out), "-q", "--disable-pip-version-check"],
        check=True,
        capture_output=True,
        timeout=300,
        cwd=out,
    )
    (found,) = out.glob("webfarm-*.whl")
    return found


def install(wheel: Path, lib: Path) -> None:
    """The wheel, then PyPI's `progress`, into one folder: a second package
    with the first's top-level name would be refused there."""
    requirement = lib.parent / "requirements-pypi.txt"
    requirement.write_text(PYPI_PROGRESS + "\n")
    pip = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps"]
    for what in ([str(wheel)], ["--require-hashes", "-r", str(requirement)]):
        subprocess.run(
            [*pip, "--target", str(lib), *what],
            check=True,
            capture_output=True,
            timeout=300,
        )


def make_site(wheel: Path, base: Path) -> Path:
    """A new project in base/site with the wheel and PyPI's `progress`
    installed in base/lib; returns the site's folder."""
    install(wheel, base / "lib")
    site = base / "site"
    site.mkdir()
    subprocess.run(
        [str(processes.BIN / "django-admin"), "startproject", "mysite", str(site)], check=True, timeout=60
    )
    with (site / "mysite" / "settings.py").open("a") as settings:
        settings.write(SETTINGS.format(apps=APPS))
    (site / "mysite" / "celery.py").write_text(CELERY)
    (site / "mysite" / "__init__.py").write_text("from .celery import app as celery_app\n")
    (site / "mysite" / "urls.py").write_text(URLS)
    with (site / "mysite" / "wsgi.py").open("a") as wsgi:
        wsgi.write(WSGI)
    shop = site / "shop"
    shop.mkdir()
    (shop / "__init__.py").write_text("")
    (shop / "tasks.py").write_text(TASKS)
    (shop / "views.py").write_text(VIEWS)
    for name, text in TEMPLATES.items():
        (shop / "templates" / name).parent.mkdir(parents=True, exist_ok=True)
        (shop / "templates" / name).write_text(textwrap.dedent(text))
    return site


def site_env(base: Path, memcached: str) -> dict:
    """The project's environment: the wheel's files on the path, never this repository."""
    return {
        "PATH": f"{processes.BIN}:/usr/bin:/bin",
        "PYTHONPATH": str(base / "lib"),
        "DJANGO_SETTINGS_MODULE": "mysite.settings",
        "SITE_MEMCACHED": memcached,
        "SITE_DB": str(base / "site.sqlite3"),
    }


def manage(site: Path, env: dict, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=site, env=env, capture_output=True, text=True, timeout=120
    )
    if done.returncode:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout
