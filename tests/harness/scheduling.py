"""Which tests run together on one pytest-xdist worker, and which start first.

`make test` runs the suite on several workers (`--dist loadgroup`): most
farm tests spend their time waiting on processes, so two cores can keep
several farms busy. A farm is built once per worker that needs it, so the
tests that share one are kept on one worker (an `xdist_group`):

* a module's tests, which share its module-scoped farm;
* the tests on the session's shared farm (tests/conftest.py `farm`), one
  group per broker and tier, so that each builds that farm once;
* the hosts tier's tests, whose farms of hosts are the heaviest;
* unit tests stand alone: each goes to whichever worker is free.

The marks go on before pytest-xdist reads them (tests/conftest.py runs its
hook first), and `check_grouped` stops a run in which xdist would not keep
them: with pytest 9.2 the suffix xdist appends to a test's id no longer
takes (pytest-dev/pytest-xdist#1386), and xdist reads no group from an id
with a "]" after its "@". Nothing failed then, the groups were simply
ignored: workers built copies of a shared farm of their own, and farms of
hosts ran side by side.

Groups start longest first (LONGEST, from the table in CONTRIBUTING.md), so
that the run does not end waiting on one long group that started last; the
unit tests fill the gaps at the end.
"""

import pytest

# The groups that take longest, longest first (CONTRIBUTING.md, "Where the
# time goes"); every other farm, host and browser module follows them, then
# the unit tests.
LONGEST = (
    "hosts",
    "shared-farm-memcached:browser",
    "tests/farm/test_soak.py",
    "tests/farm/test_chaos.py",
    "tests/farm/test_job_delivery.py",
    "tests/farm/test_fanout.py",
    "shared-farm-memcached:farm",
    "tests/farm/test_broker.py",
    "shared-farm-redis:browser",
    "tests/farm/test_nginx_farm.py",
    "tests/farm/test_poll_spike.py",
    "tests/farm/test_trust.py",
    "tests/farm/test_attacks.py",
    "tests/farm/test_bad_input_http.py",
    "shared-farm-redis:farm",
)


def group_of(item: pytest.Item) -> str | None:
    """The group `item` runs in, or None for a test that may run anywhere."""
    tier = item.nodeid.split("/")[1] if item.nodeid.startswith("tests/") else ""
    if tier == "unit":
        return None
    if tier == "hosts":
        # Two farms of hosts at once starve each other's timing checks under
        # load (a memcached host vanishing, the chaos run's imports): one at a time.
        return "hosts"
    definitions = item._fixtureinfo.name2fixturedefs.get("farm", ())  # type: ignore[attr-defined]
    if definitions and definitions[-1].scope == "session":
        broker = item.callspec.params.get("farm") if hasattr(item, "callspec") else None
        return f"shared-farm-{broker}:{tier}"
    return item.nodeid.split("::")[0]


def group_and_order(items: list[pytest.Item]) -> None:
    """Mark each test with its group and put the longest groups first (in
    place; the order of tests within a group is kept)."""
    rank = {name: n for n, name in enumerate(LONGEST)}
    groups = {}
    for item in items:
        group = groups[item.nodeid] = group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))

    def order(indexed: tuple[int, pytest.Item]) -> tuple[int, int]:
        index, item = indexed
        group = groups[item.nodeid]
        if group is None:
            return (len(LONGEST) + 1, index)
        return (rank.get(group, len(LONGEST)), index)

    items[:] = [item for _, item in sorted(enumerate(items), key=order)]


def check_grouped(config: pytest.Config, ids: list[str]) -> None:
    """On the controller of a --dist loadgroup run, with a worker's collection:
    every test outside tests/unit is in a group as xdist reads it, or the
    scheduler would spread the group over the workers. Stops the run when one
    is not."""
    if config.getvalue("dist") != "loadgroup":
        return
    # xdist's own reading (LoadGroupScheduling._split_scope): the group is
    # what follows the last "@" of the id, if no "]" does.
    lost = [
        nodeid
        for nodeid in ids
        if not nodeid.startswith("tests/unit/") and not nodeid.rfind("@") > nodeid.rfind("]")
    ]
    if lost:
        pytest.exit(
            f"pytest-xdist reads no xdist_group for {len(lost)} tests (first: {lost[0]}), so it would "
            "spread their groups over the workers. A group's name may not hold a ']', and pytest 9.2 "
            "drops the group xdist appends (pytest-dev/pytest-xdist#1386): use the pytest that "
            "requirements.txt pins.",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )
