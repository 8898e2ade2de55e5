"""Counter incrementer or harvester processes for the stats tests."""

import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.project.settings")


def main() -> None:
    import django

    django.setup()
    from webfarm.core.client import get_client
    from webfarm.core.counters import count
    from webfarm.stats.harvest import harvest

    role, arg = sys.argv[1], int(sys.argv[2])
    if role == "count":
        for i in range(arg):
            count("hits", kind="a" if i % 2 else "b")
        return
    # harvest until told to stop, then once more
    while not get_client().get("test:stop"):
        harvest()
    harvest()


if __name__ == "__main__":
    main()
