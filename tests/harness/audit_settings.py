"""The site's settings with what an audit of its edges needs to see: a
password hasher that counts (a line per hash in $HASH_COUNT_FILE) and a
user agent the site refuses, as a project may set DISALLOWED_USER_AGENTS."""

import re

from demofarm.settings import *  # noqa: F403 (the site's own settings, as they are)

PASSWORD_HASHERS = ["tests.harness.hashers.CountingHasher"]
DISALLOWED_USER_AGENTS = [re.compile(r"BadBot")]
