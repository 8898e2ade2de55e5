"""The harness's ports: a server another test's server got to first is never
taken for ours (tests/harness/ports.py)."""

import socket

import pytest

from tests.harness import ports, processes


def test_each_worker_has_a_band_of_its_own_below_the_ephemeral_range(monkeypatch):
    bands = []
    for worker in ["gw0", "gw1", "gw2", "gw14", ""]:
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        bands.append(set(ports.band()))
    assert all(len(band) > 1000 for band in bands)
    assert sum(len(band) for band in bands) == len(set().union(*bands))  # no port in two bands
    assert max(max(band) for band in bands) < ports._ephemeral_low()


def test_a_port_is_handed_out_once_and_never_one_something_listens_on(monkeypatch):
    monkeypatch.setattr(ports, "_next", None)
    first = ports.free_port()
    with socket.create_server(("127.0.0.1", first + 1)):  # taken before it comes up
        handed = [ports.free_port() for _ in range(50)]
    assert first + 1 not in handed
    assert len({*handed, first}) == 51
    assert all(port in ports.band() for port in handed)


def test_a_memcached_whose_port_another_holds_is_refused_not_taken_for_ours(tmp_path):
    """The other one answers on the port; ours exited, unable to bind."""
    other, address = processes.memcached(tmp_path)
    try:
        with pytest.raises(RuntimeError, match="not ours"):
            processes.memcached(tmp_path, port=int(address.rsplit(":", 1)[1]))
    finally:
        other.stop()
