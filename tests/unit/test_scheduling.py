"""The suite's own scheduling (tests/harness/scheduling.py): a group xdist
would not keep stops the run before a farm starts."""

from types import SimpleNamespace

import pytest

from tests.harness import scheduling


def _config(dist: str) -> SimpleNamespace:
    return SimpleNamespace(getvalue=lambda name: {"dist": dist}[name])


def test_grouped_ids_pass():
    ids = ["tests/farm/test_a.py::test_x@tests/farm/test_a.py", "tests/unit/test_b.py::test_y"]
    scheduling.check_grouped(_config("loadgroup"), ids)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "nodeid",
    [
        # pytest 9.2: the suffix xdist appends never reaches the id.
        "tests/farm/test_a.py::test_x",
        # A "]" after the "@": xdist reads no group (its _split_scope).
        "tests/browser/test_b.py::test_y[memcached]@shared-farm[memcached]:browser",
    ],
)
def test_an_id_xdist_reads_no_group_from_stops_the_run(nodeid):
    with pytest.raises(pytest.exit.Exception, match="reads no xdist_group for 1 tests"):
        scheduling.check_grouped(_config("loadgroup"), [nodeid])  # type: ignore[arg-type]


def test_other_distributions_are_not_checked():
    scheduling.check_grouped(_config("load"), ["tests/farm/test_a.py::test_x"])  # type: ignore[arg-type]


def test_no_group_name_holds_what_xdist_would_misread():
    names = [*scheduling.LONGEST, "shared-farm-memcached:browser"]
    assert all("]" not in name and "@" not in name for name in names)
