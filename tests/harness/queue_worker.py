"""A producer or consumer process for the queue tests: python -m tests.harness.queue_worker ..."""

import argparse
import os
import random
import sys
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.project.settings")


def main() -> None:
    import django

    django.setup()
    from webfarm.queues.queue import Queue

    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["produce", "consume", "hold"])
    parser.add_argument("--queue", required=True)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--out")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    queue = Queue(args.queue)
    rng = random.Random(args.seed)

    if args.role == "produce":
        ids = list(range(args.first, args.first + args.count))
        while ids:
            batch = ids[: rng.choice([1, 1, 5, 50])]
            ids = ids[len(batch) :]
            queue.put_many([str(i).encode().ljust(200, b".") for i in batch])
        return

    if args.role == "hold":  # claim some, say so, then wait to be killed
        claimed = queue.claim_many(args.count)
        print(" ".join(str(m.body.rstrip(b".").decode()) for m in claimed), flush=True)
        time.sleep(3600)
        return

    # consume until the parent raises the "done" flag and the queue stays empty
    from webfarm.core.client import server_client

    done_key = f"test:{args.queue}:done"
    idle_since = None
    with open(args.out, "w") as out:
        while True:
            messages = queue.claim_many(rng.choice([1, 10, 50]))
            if messages:
                idle_since = None
                out.write("".join(m.body.rstrip(b".").decode() + "\n" for m in messages))
                queue.ack_many([m.receipt for m in messages])
                continue
            if server_client("q:" + args.queue).get(done_key):
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since > 3:
                    break
            time.sleep(0.005)


if __name__ == "__main__":
    sys.exit(main())
