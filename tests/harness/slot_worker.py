"""One of many processes racing for the same limit's slots (tests/unit/test_limits.py)."""

import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.project.settings")


def main() -> None:
    import django

    django.setup()
    from tests.harness.together import at_start_line
    from webfarm.core.slots import LimitReached, acquire

    at_start_line()
    try:
        acquire([("race", 3)], f"p{os.getpid()}", ttl=60, attempts=int(sys.argv[1]), pause=0.01)
    except LimitReached:
        print("refused", flush=True)
    else:
        print("took", flush=True)


if __name__ == "__main__":
    main()
