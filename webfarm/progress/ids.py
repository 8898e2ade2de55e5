"""Job ids: 128 random bits, URL-safe, and a strict check for untrusted input."""

import re
import secrets

JOB_ID_LENGTH = 22  # 16 random bytes in unpadded base64url
# A job id, and a read token, as a regular expression.
ID_PATTERN = rf"[A-Za-z0-9_-]{{{JOB_ID_LENGTH}}}"
_JOB_ID_RE = re.compile(ID_PATTERN)


def new_job_id() -> str:
    return secrets.token_urlsafe(16)


def new_read_token() -> str:
    """The capability in a job's progress URL that nginx's fast path checks
    (it cannot see sessions): as unguessable as a job id, and of its shape."""
    return secrets.token_urlsafe(16)


def is_valid_job_id(value: object) -> bool:
    """True only for strings that new_job_id() could have made.

    Anything else is rejected before it reaches memcached, whose keys may not
    hold whitespace or control characters.
    """
    return isinstance(value, str) and _JOB_ID_RE.fullmatch(value) is not None


# A read token has a job id's shape: 22 URL-safe characters.
is_valid_read_token = is_valid_job_id


class JobIdConverter:
    """`<webfarm_job:job_id>` in a URL pattern (registered by the progress
    app): only a string new_job_id() could have made reaches the view; any
    other is a 404, never a query (PostgreSQL refuses a NUL byte with an error)."""

    regex = ID_PATTERN

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value
