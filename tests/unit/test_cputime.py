"""The run-time tables of tests/harness/cputime.py, from files written as a
run writes them."""

from pathlib import Path

from tests.harness.cputime import group, summary


def test_a_test_belongs_to_its_xdist_group_or_its_module():
    assert group("tests/farm/test_farm.py::test_x[redis]@shared-farm-redis:farm") == "shared-farm-redis:farm"
    assert group("tests/farm/test_soak.py::test_y") == "tests/farm/test_soak.py"
    assert group("tests/unit/test_queue.py::test_z") == "unit tests"


def test_cpu_is_counted_to_the_test_its_worker_was_running(tmp_path: Path):
    (tmp_path / "timeline-gw0.tsv").write_text(
        "tests/farm/test_a.py::t1@a\tsetup\t100.00\t101.00\n"
        "tests/farm/test_a.py::t1@a\tcall\t101.00\t110.00\n"
        "tests/unit/test_u.py::t2\tcall\t120.00\t121.00\n"
    )
    (tmp_path / "timeline-gw1.tsv").write_text("tests/farm/test_b.py::t3\tcall\t100.00\t104.00\n")
    (tmp_path / "cpu.tsv").write_text(
        "105.00\tgw0\tcelery\t1.50\n"
        "106.00\tgw0\tgunicorn\t0.50\n"
        "103.00\tgw1\tchromium\t0.75\n"
        "115.00\tgw0\tpytest\t0.25\n"  # nothing ran on gw0 then
        "105.00\tnone\tpostgres\t2.00\n"
    )
    table = summary(tmp_path)
    assert "| a | 10 | 2 | celery 2, gunicorn 0 |" in table
    assert "| tests/farm/test_b.py | 4 | 1 | chromium 1 |" in table
    assert "| between tests | 0 | 0 | pytest 0 |" in table
    assert "| outside the workers (none) | 0 | 2 | postgres 2 |" in table
    assert "CPU in all: 5 s" in table and "gw0 21 s, gw1 4 s" in table
