"""The progress app's settings: one DEFAULTS dict overlaid by settings.PROGRESS."""

from typing import Any

from core.appsettings import AppSettings

DEFAULTS: dict[str, Any] = {
    # A task may call update() millions of times; memcached sees at most one
    # write per interval (seconds).
    "FLUSH_INTERVAL": 0.25,
    # A running job proves it is alive at least this often (seconds), even
    # when its code is stuck in one long step.
    "HEARTBEAT_INTERVAL": 5.0,
    # A running job that has not beaten for this many intervals is lost (its
    # worker died): the reaper ends it, frees its slots and may retry it.
    "LOST_AFTER_BEATS": 3,
    # How long a queued or running job's record stays in memcached (seconds, at
    # most 30 days: memcached reads larger values as absolute times). A running
    # job rewrites it every heartbeat: this bounds one that nothing ends.
    "RECORD_TTL": 24 * 3600,
    # How long an ended job's record and public document stay (seconds): the
    # widget sees the end within its longest back-off (30 s); later reads come
    # from the database row.
    "FINAL_TTL": 300,
    # A queued job whose task never left (the web process died before sending
    # it) is sent by the reaper after SEND_GRACE seconds. One still queued
    # RESEND_AFTER seconds after its task was sent (at once if memcached lost
    # its record: a memcached broker lost the task with it) is sent once more,
    # and one still queued QUEUED_LOST_AFTER seconds after that is ended as
    # lost: set it above the longest wait your queue can have.
    "SEND_GRACE": 30.0,
    "RESEND_AFTER": 120.0,
    "QUEUED_LOST_AFTER": 1800.0,
    # Jobs queued or running at once, farm-wide, for job types that do not
    # set their own (JobType.limits()): per user, per job type.
    "JOBS_PER_USER": 2,
    "JOBS_PER_KIND": 4,
    # Seconds a queued job holds its limit slots without renewal (a web node
    # that died between taking them and queueing the job frees them after this).
    "QUEUED_LEASE": 600,
    # Quick tries for a slot before a refusal, and the pause after the first
    # (it grows linearly); Retry-After when no running job's ETA says better.
    "START_ATTEMPTS": 3,
    "START_PAUSE": 0.001,
    "RETRY_AFTER": 5,
    # Days an ended job (its row, parts and result files) is kept; 0: for good.
    "KEEP_DAYS": 30,
}

get_config = AppSettings("PROGRESS", DEFAULTS)


def lost_after() -> float:
    """Seconds of silence after which a running job counts as lost."""
    config = get_config()
    return config["LOST_AFTER_BEATS"] * config["HEARTBEAT_INTERVAL"]
