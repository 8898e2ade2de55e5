"""`make run`'s choice of memcached (demofarm.launch): its own on the port
it is given, the one already answering there, said in the banner, or a
clear refusal when something else holds the port."""

import socket
import threading

import pytest

from demofarm.launch import PortTaken, memcached_version, select_processes
from tests.harness.processes import free_port


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def test_a_free_port_gets_a_memcached_of_its_own_there():
    port = free_port()
    env: dict[str, str] = {}
    names, said = select_processes(env, port)
    assert names[0] == "memcached" and said == ""
    assert env["MEMCACHED_SERVERS"] == f"127.0.0.1:{port}" and env["MEMCACHED_PORT"] == str(port)


def test_a_memcached_already_there_is_used_and_the_banner_says_so(memcached_server):
    port = _port(memcached_server)
    assert memcached_version("127.0.0.1", port)
    env: dict[str, str] = {}
    names, said = select_processes(env, port)
    assert "memcached" not in names and env["MEMCACHED_SERVERS"] == f"127.0.0.1:{port}"
    assert f"the one already on 127.0.0.1:{port} (version " in said


def test_something_else_on_the_port_stops_the_launch():
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def answer_like_a_web_server() -> None:
        for _ in range(2):  # the launcher's knock, then its question
            conn, _ = listener.accept()
            with conn:
                if conn.recv(64):
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    server = threading.Thread(target=answer_like_a_web_server, daemon=True)
    server.start()
    try:
        with pytest.raises(PortTaken, match=f"127.0.0.1:{port} is taken by something that is not memcached"):
            select_processes({}, port)
    finally:
        server.join(5)
        listener.close()


def test_a_memcached_configured_elsewhere_is_left_alone():
    env = {"MEMCACHED_SERVERS": "10.0.0.5:11211"}
    names, said = select_processes(env, free_port())
    assert "memcached" not in names and said == "" and env["MEMCACHED_SERVERS"] == "10.0.0.5:11211"
