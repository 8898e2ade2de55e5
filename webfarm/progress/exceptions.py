# Seconds a client is asked to wait (Retry-After) when the progress store or
# the broker is away: a poll and a start alike.
UNAVAILABLE_RETRY_AFTER = 5


class ProgressUnavailable(Exception):
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
