# Seconds a client is asked to wait (Retry-After) when the progress store or
# the broker is away: a poll and a start alike.
UNAVAILABLE_RETRY_AFTER = 5


class TryLater(Exception):
    """The farm cannot do it now (a start over a limit, memcached or the
    broker away): say `str(exc)` and ask again after `retry_after` seconds.
    webfarm.progress.web.start_response() answers each as a 503."""

    retry_after: int = UNAVAILABLE_RETRY_AFTER


class ProgressUnavailable(TryLater):
    """memcached could not be reached or refused the write (full under -M)."""


class JobCancelled(Exception):
    """Raised inside a task when its job has been cancelled; the job ends cleanly."""


class JobNotRunnable(Exception):
    """The job was cancelled before it started, or is unknown: the task must not run."""


class JobFailed(Exception):
    """A failure whose message is meant for the job's owner (bad parameters,
    no data in range...). Any other exception is shown as an internal error."""


class JobLost(Exception):
    """What a lost job's API clients are told ended it: its worker stopped, or
    its task never reached one (never raised; named in a result's errors)."""


class JobEnded(Exception):
    """Raised inside a task whose job was ended by someone else while it ran
    (the reaper took it for lost): the task stops and writes nothing more."""
