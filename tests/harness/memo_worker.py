"""One of many processes calling get_or_set at once (tests/unit/test_memo.py)."""

import os
import sys
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.project.settings")


def main() -> None:
    import django

    django.setup()
    from tests.harness.together import at_start_line
    from webfarm.core.client import get_client
    from webfarm.core.memo import get_or_set

    client = get_client()

    def expensive() -> dict:
        client.incr("test:computations", 1)
        time.sleep(0.5)  # the expensive aggregate
        return {"total": 42}

    at_start_line()
    print(get_or_set(sys.argv[1], expensive, ttl=60)["total"], flush=True)


if __name__ == "__main__":
    main()
