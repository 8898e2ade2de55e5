"""The periodic work the library's apps need, as Celery beat entries.

The core app adds them to beat's schedule as it starts (Celery's beat_init,
connected by webfarm.core.apps): a site runs one `celery beat` and writes
nothing. An
entry of the same name in CELERY_BEAT_SCHEDULE is the site's, and wins (a
shorter reaper interval, say). Without beat a job whose worker died stays
running for ever (no reaper), ended jobs, sessions and the site log pile up,
and the counters are never harvested. The tasks are named here as strings:
each app defines its own, and only the installed apps' are scheduled.
"""

from collections.abc import Iterable
from typing import Any

from django.apps import apps
from django.conf import settings

# Why some sends expire: while no worker is up, they would pile up in the
# broker and all run at once when one comes back. The drainer and the
# harvester are not expired: each run takes what the missed ones left.
_EVERY_APP: dict[str, list[tuple[str, str, str, float | None]]] = {
    # app: [(entry, task, interval's keyword, expires after how many intervals)]
    "webfarm.core": [("clear-expired-sessions", "webfarm.core.clear_expired_sessions", "hourly", 1)],
    "webfarm.queues": [("forget-idle-http-queues", "webfarm.queues.forget_idle", "five_minutes", 1)],
    "webfarm.progress": [
        # The reaper's sends may wait one more interval: it runs often, and briefly.
        ("reap-lost-jobs", "webfarm.progress.reap_lost_jobs", "reap_every", 2),
        ("purge-ended-jobs", "webfarm.progress.purge_ended_jobs", "hourly", 1),
    ],
    "webfarm.activity": [("drain-sitelog", "webfarm.activity.drain_sitelog", "drain_every", None)],
    "webfarm.stats": [("harvest-counters", "webfarm.stats.harvest_counters", "harvest_every", None)],
}
# The task a site without the reaper would miss most (webfarm.progress.checks warns).
REAPER = "webfarm.progress.reap_lost_jobs"


def schedule(
    installed_apps: Iterable[str],
    *,
    reap_every: float = 5.0,
    drain_every: float = 5.0,
    harvest_every: float = 60.0,
    mirrors: bool = False,
) -> dict[str, dict[str, Any]]:
    """CELERY_BEAT_SCHEDULE entries for the library's apps in `installed_apps`.

    `reap_every`: how soon a job whose worker died is ended (or run again);
    `drain_every`: how soon the site log reaches its file; `harvest_every`:
    the counters' resolution; `mirrors`: the site mirrors its HTTP queues
    (QUEUES["MIRRORS"]), which then need repairing after a restart.
    """
    installed = {app.split(".apps.")[0] for app in installed_apps}
    every = {
        "reap_every": reap_every,
        "drain_every": drain_every,
        "harvest_every": harvest_every,
        "five_minutes": 300.0,
        "hourly": 3600.0,
    }
    entries: dict[str, dict[str, Any]] = {}
    for app, wanted in _EVERY_APP.items():
        if app not in installed:
            continue
        for name, task, interval, expires_after in wanted:
            seconds = every[interval]
            entries[name] = {"task": task, "schedule": seconds}
            if expires_after is not None:
                entries[name]["options"] = {"expires": expires_after * seconds}
    if mirrors and "webfarm.queues" in installed:
        entries["repair-queue-mirrors"] = {"task": "webfarm.queues.repair_mirrors", "schedule": 30.0}
    return entries


def on_beat_init(sender: Any, **kwargs: Any) -> None:
    """Celery's beat_init: the installed apps' entries onto the starting
    beat's schedule, but for the names the site's CELERY_BEAT_SCHEDULE holds."""
    installed = [config.name for config in apps.get_app_configs()]
    mirrors = bool(getattr(settings, "QUEUES", {}).get("MIRRORS"))
    site = sender.app.conf.beat_schedule or {}
    ours = schedule(installed, mirrors=mirrors)
    sender.scheduler.update_from_dict({name: entry for name, entry in ours.items() if name not in site})
