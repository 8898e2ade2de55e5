"""`make bench`: every benchmark, each against a baseline measured in the same run."""

from bench import (
    broker_soak,
    celery_broker,
    contention,
    dashboard,
    endpoint,
    fanout,
    farm,
    memory,
    polls,
    poolcost,
    publish,
    queue,
    roundtrips,
    shedding,
    task_path,
    tasks,
)


def main() -> None:
    print(roundtrips.report(roundtrips.run()), flush=True)
    print()
    print(poolcost.report(poolcost.run()), flush=True)
    print()
    print(publish.report(publish.run()), flush=True)
    print()
    print(endpoint.report(endpoint.run()), flush=True)
    print()
    print(queue.report(queue.run()), flush=True)
    print()
    print(celery_broker.report(celery_broker.run()), flush=True)
    print()
    print(shedding.report(shedding.run()), flush=True)
    print()
    print(dashboard.report(dashboard.run()), flush=True)
    print()
    print(polls.report(polls.run()), flush=True)
    print()
    print(farm.report(farm.run()), flush=True)
    print()
    print(fanout.report(fanout.run()), flush=True)
    print()
    print(contention.report(contention.run()), flush=True)
    print()
    print(tasks.report(tasks.run()), flush=True)
    print()
    print(task_path.report(task_path.run()), flush=True)
    print()
    print(memory.report(memory.run()), flush=True)
    print()
    print(broker_soak.report(broker_soak.run()), flush=True)


if __name__ == "__main__":
    main()
