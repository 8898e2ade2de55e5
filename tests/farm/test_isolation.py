"""The suite never reaches a farm it did not start: a memcached, database or
broker that a developer's environment names (their `make run`, say) sees no
write and no connection while in-process tests run, not even from a thread
that ships log records after a test has ended."""

import os
import socket
import subprocess
import sys
import threading

import pytest

from tests.harness import keyspace, processes
from tests.harness.processes import ROOT

pytestmark = pytest.mark.farm


class Listener:
    """A port that counts who connects to it (a database or a Redis that must
    not be reached); it answers nothing."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(5)
        self.sock.close()


def test_in_process_tests_reach_nothing_the_developers_environment_names(tmp_path):
    database, broker = Listener(), Listener()
    try:
        with processes.stopped_after() as started:
            sentinel, address = processes.memcached(tmp_path)
            started.append(sentinel)
            env = {
                **os.environ,
                # A developer's shell, naming their own farm.
                "MEMCACHED_SERVERS": address,
                "DATABASE_URL": f"postgres://webfarm@{database.address}/webfarm",
                "CELERY_BROKER_URL": f"redis://{broker.address}/0",
            }
            connections = keyspace.stats(address)["total_connections"]
            result = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    "-m",
                    "not farm",
                    "tests/unit/test_activity.py",
                    "tests/unit/test_users.py",
                    "tests/unit/test_sessions.py",
                    "tests/unit/test_services.py",
                ],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert result.returncode == 0, result.stdout[-3000:]
            stats = keyspace.stats(address)
            assert (stats["cmd_set"], stats["curr_items"], stats["total_items"]) == (0, 0, 0), stats
            assert stats["total_connections"] == connections + 1, stats  # only the stats just asked for
    finally:
        database.close()
        broker.close()
    assert (database.connections, broker.connections) == (0, 0)
