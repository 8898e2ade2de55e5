"""The progress app's settings, overlaid by settings.PROGRESS."""

from webfarm.core.appsettings import AppSettings, Setting

get_config = AppSettings(
    "PROGRESS",
    [
        # A task may call update() millions of times; memcached sees at most
        # one write per interval.
        Setting("FLUSH_INTERVAL", 0.25, "seconds between a task's progress writes"),
        # Even when its code is stuck in one long step.
        Setting("HEARTBEAT_INTERVAL", 5.0, "seconds between heartbeats of a running job"),
        # Its worker died: the reaper ends it, frees its slots and may retry it.
        Setting("LOST_AFTER_BEATS", 3, "heartbeats a running job may miss before the reaper ends it as lost"),
        # A running job rewrites it every heartbeat: this bounds one that
        # nothing ends. memcached reads more than 30 days as an absolute time.
        Setting(
            "RECORD_TTL",
            24 * 3600,
            "seconds a queued or running job's record stays in memcached (at most 30 days)",
        ),
        # The widget sees the end within its longest back-off (30 s); later
        # reads come from the database row.
        Setting(
            "FINAL_TTL",
            300,
            "seconds an ended job's record and public document stay (then the database answers)",
        ),
        # A web process that died before sending the task.
        Setting("SEND_GRACE", 30.0, "seconds before the reaper sends a queued job's task that never left"),
        # At once if memcached lost its record: a memcached broker lost the task with it.
        Setting(
            "RESEND_AFTER",
            120.0,
            "seconds after its send before a still-queued job's task is sent once more",
        ),
        Setting(
            "QUEUED_LOST_AFTER",
            1800.0,
            "seconds after that before a job still queued is ended as lost: above the longest wait your "
            "queue can have",
        ),
        Setting(
            "JOBS_PER_USER",
            2,
            "jobs queued or running at once, farm-wide, per user, for job types that set no limits of their "
            "own",
        ),
        Setting("JOBS_PER_KIND", 4, "the same, per job type"),
        # A web node that died between taking them and queueing the job frees them after this.
        Setting("QUEUED_LEASE", 600, "seconds a queued job holds its limit slots without renewal"),
        # The pause grows linearly.
        Setting("START_ATTEMPTS", 3, "quick tries for a slot before a start is refused"),
        Setting("START_PAUSE", 0.001, "seconds of the first pause between those tries"),
        # When no running job's ETA says better.
        Setting("RETRY_AFTER", 5, "`Retry-After` of a refused start, in seconds"),
        # What a poll costs is mostly Django's machinery around the view.
        Setting(
            "POLL_GATE",
            True,
            "answer progress polls before Django's middleware chain, with the same views and the "
            "middleware a poll needs (webfarm.progress.pollgate, where wsgi.py wraps the app in it); "
            "`False`: Django answers them",
        ),
        Setting(
            "KEEP_DAYS",
            30,
            "days an ended job (its row, parts and result files) is kept before beat deletes it; `0` keeps "
            "it",
        ),
    ],
)


def lost_after() -> float:
    """Seconds of silence after which a running job counts as lost."""
    config = get_config()
    return float(config["LOST_AFTER_BEATS"] * config["HEARTBEAT_INTERVAL"])
