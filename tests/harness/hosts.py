"""A farm's machines for tests: one Linux network namespace per host, each
with its own address on one bridge, and the faults a network makes.

Every address lives inside namespaces this module made (a switch namespace
holds the bridge; nothing is added to the machine's own network), in
198.18.0.0/15, the range reserved for benchmarking networks. Namespaces are
named wf<pid>-<host>: whatever happens, `lan()` removes its own on the way
out, and a run removes those a killed run left behind (their pid is gone).

The test itself reaches the farm from a host of its own: `with
lan.inside("client"):` makes the sockets this thread opens belong to that
host (setns), so requests, wrk and a browser started there are the farm's
visitors.
"""

import ctypes
import os
import re
import shlex
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from tests.harness.processes import ROOT, Process, wait_for

SUBNET = "198.18.0"
PREFIX = 24
NETNS_DIR = Path("/run/netns")
_CLONE_NEWNET = 0x40000000
_OURS = re.compile(r"^wf(\d+)-")
# A locally administered hardware address no host on the bridge has.
NOBODY = "02:00:00:de:ad:00"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], check=True, capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _kill_all_in(netns: str) -> None:
    pids = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True).stdout.split()
    for pid in pids:
        with suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


def _remove(netns: str) -> None:
    _kill_all_in(netns)
    subprocess.run(["ip", "netns", "delete", netns], capture_output=True, timeout=30)


def remove_leftovers() -> list[str]:
    """Remove the namespaces of runs whose process is gone (killed before
    they could clean up); the names removed."""
    removed = []
    for name in namespaces():
        match = _OURS.match(name)
        if match and not Path(f"/proc/{match.group(1)}").exists():
            _remove(name)
            removed.append(name)
    return removed


def _setns(fd: int) -> None:
    """Move this thread into the network namespace `fd` is open on."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, _CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns: {os.strerror(errno)}")


class Lan:
    """Hosts on one bridge. `addresses` maps a host's name to its address.

    one_machine=True: the same hosts and addresses, all in one namespace, on
    its loopback: the farm on one machine, for comparing with (bench/farm.py)."""

    def __init__(self, hosts: dict[str, int], *, one_machine: bool = False) -> None:
        self.one_machine = one_machine
        self.tag = f"wf{os.getpid()}"
        self.switch = f"{self.tag}-switch"
        self.addresses = {name: f"{SUBNET}.{octet}" for name, octet in hosts.items()}
        self._made: list[str] = []

    def netns(self, host: str) -> str:
        return f"{self.tag}-machine" if self.one_machine else f"{self.tag}-{host}"

    def build(self) -> "Lan":
        remove_leftovers()
        if self.one_machine:
            netns = self._add_netns(self.netns(""))
            _ip("-n", netns, "link", "set", "lo", "up")
            for address in self.addresses.values():
                _ip("-n", netns, "addr", "add", f"{address}/32", "dev", "lo")
            return self
        self._add_netns(self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for index, (host, address) in enumerate(self.addresses.items()):
            netns = self._add_netns(self.netns(host))
            port = f"p{index}"  # the host's cable, at the switch
            _ip(
                "-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", netns
            )
            _ip("-n", self.switch, "link", "set", port, "master", "br0", "up")
            _ip("-n", netns, "addr", "add", f"{address}/{PREFIX}", "dev", "eth0")
            _ip("-n", netns, "link", "set", "eth0", "up")
            _ip("-n", netns, "link", "set", "lo", "up")
        return self

    def _add_netns(self, name: str) -> str:
        _ip("netns", "add", name)
        self._made.append(name)
        return name

    def remove(self) -> None:
        """Kill every process in the hosts and delete every namespace made."""
        for name in reversed(self._made):
            _remove(name)
        self._made = []

    # -- running things on a host --------------------------------------------

    def command(self, host: str, argv: list[str]) -> list[str]:
        """argv run on `host` (in its namespace)."""
        return ["ip", "netns", "exec", self.netns(host), *argv]

    def start(self, host: str, name: str, argv: list[str], *, log_dir: Path, env: dict) -> Process:
        return Process(f"{host}-{name}", self.command(host, argv), log_dir=log_dir, env=env).start()

    def run(self, host: str, argv: list[str], *, env: dict, timeout: float = 300) -> str:
        result = subprocess.run(
            self.command(host, argv), cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
        )
        if result.returncode:
            raise RuntimeError(f"{shlex.join(argv)} on {host} failed:\n{result.stdout}\n{result.stderr}")
        return result.stdout

    @contextmanager
    def inside(self, host: str) -> Iterator[None]:
        """Sockets this thread opens (and processes it starts) belong to `host`."""
        back = os.open(f"/proc/self/task/{threading.get_native_id()}/ns/net", os.O_RDONLY)
        there = os.open(NETNS_DIR / self.netns(host), os.O_RDONLY)
        try:
            _setns(there)
            try:
                yield
            finally:
                _setns(back)
        finally:
            os.close(there)
            os.close(back)

    # -- faults ----------------------------------------------------------------

    def unplug(self, host: str) -> None:
        """Pull the host's cable out of the switch: its packets just stop
        (no reset, no error to anyone); its processes run on."""
        _ip("-n", self.switch, "link", "set", self._port(host), "down")

    def plug(self, host: str) -> None:
        _ip("-n", self.switch, "link", "set", self._port(host), "up")

    def _port(self, host: str) -> str:
        return f"p{list(self.addresses).index(host)}"

    def cut(self, source: str, target: str) -> None:
        """`source` loses its way to `target`: its packets for it go to a
        hardware address no one has, silently (no error, no reset); everyone
        else still reaches `target`, and `target` still reaches `source`."""
        _ip("-n", self.netns(source), "neigh", "replace", self.addresses[target],
            "lladdr", NOBODY, "dev", "eth0", "nud", "permanent")  # fmt: skip

    def mend(self, source: str, target: str) -> None:
        _ip("-n", self.netns(source), "neigh", "del", self.addresses[target], "dev", "eth0")

    def kill(self, host: str) -> None:
        """Every process on the host dies at once (a power cut)."""
        _kill_all_in(self.netns(host))


@contextmanager
def lan(hosts: dict[str, int], *, one_machine: bool = False) -> Iterator[Lan]:
    """Hosts by name and the last octet of their address, removed afterwards
    whatever happened."""
    network = Lan(hosts, one_machine=one_machine)
    try:
        yield network.build()
    finally:
        network.remove()


def wait_port(network: Lan, host: str, address: str, port: int, *, timeout: float = 60) -> None:
    """Wait until `address:port` accepts connections, as seen from `host`."""
    with network.inside(host):
        wait_for(
            lambda: socket.create_connection((address, port), timeout=0.5).close() or True,
            timeout=timeout,
            what=f"{address}:{port}, seen from {host}",
        )
