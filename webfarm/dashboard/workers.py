"""Live workers: every Celery worker keeps a heartbeat record in memcached.

Celery's ping is a broadcast, which the memcached broker does not carry (no
fanout). A heartbeat works on either broker, and says more than a ping: when a
worker was last heard from, how busy it is, and that it stopped cleanly.
"""

import hashlib
import json
import logging
import math
import os
import re
import socket
import threading
import time
from typing import Any

from celery.signals import worker_ready, worker_shutdown
from celery.worker import state as worker_state
from pymemcache.exceptions import MemcacheError

from webfarm.core.client import get_client
from webfarm.core.lists import add_member, members, remove_members
from webfarm.core.seal import seal, unseal
from webfarm.core.tampering import refused
from webfarm.dashboard.conf import get_config

logger = logging.getLogger(__name__)

REGISTRY = "workers:registry"
# A record outlives its worker by a day, so the dashboard can say when it went quiet.
RECORD_TTL = 24 * 3600
MISSED_BEATS = 3
_ID_RE = re.compile(r"[0-9a-f]{16}")
_STATES = {"up", "stopped"}


def _is_worker_id(value: str) -> bool:
    return _ID_RE.fullmatch(value) is not None


def _checked(record: Any) -> dict[str, Any]:
    """A heartbeat record as Heartbeat.beat() writes it, else ValueError."""
    if not isinstance(record, dict) or record.get("state") not in _STATES:
        raise ValueError("not a heartbeat")
    for name in ("hostname", "node"):
        if not isinstance(record.get(name), str):
            raise ValueError(f"bad {name}")
    for name in ("seen", "every", "started"):
        value = record.get(name)
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
            raise ValueError(f"bad {name}")
    if record["every"] <= 0:
        raise ValueError("bad every")
    for name in ("pid", "concurrency", "active", "processed"):
        if not isinstance(record.get(name), int):
            raise ValueError(f"bad {name}")
    if not isinstance(record.get("queues"), list) or not all(isinstance(q, str) for q in record["queues"]):
        raise ValueError("bad queues")
    return record


def _key(worker_id: str) -> str:
    return f"workers:{worker_id}"


def worker_id(hostname: str) -> str:
    # Celery hostnames are free text (-n); memcached keys are not.
    return hashlib.blake2b(hostname.encode(), digest_size=8).hexdigest()


class Heartbeat:
    """Writes one worker's record now and then from a daemon thread."""

    def __init__(self, hostname: str, *, concurrency: int, queues: list[str], every: float) -> None:
        self.id = worker_id(hostname)
        self.every = every
        self.record: dict[str, Any] = {
            "hostname": hostname,
            "node": socket.gethostname(),
            "pid": os.getpid(),
            "concurrency": concurrency,
            "queues": queues,
            "started": time.time(),
            "every": every,
        }
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-heartbeat", daemon=True)

    def start(self) -> None:
        self.beat()  # listed before the worker takes its first task
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.every)
        self.beat(state="stopped")

    def beat(self, *, state: str = "up") -> None:
        record = {
            **self.record,
            "state": state,
            "seen": time.time(),
            "active": len(worker_state.active_requests),
            "processed": worker_state.all_total_count[0],
        }
        try:
            client = get_client()
            key = _key(self.id)
            client.set(key, seal(key, json.dumps(record).encode(), ttl=RECORD_TTL), expire=RECORD_TTL)
            # Checked every beat: memcached may have restarted and lost the list.
            if self.id not in members(client, REGISTRY, _is_worker_id):
                add_member(client, REGISTRY, self.id)
        except (MemcacheError, OSError) as exc:
            # Next beat tries again; the dashboard shows the worker as silent meanwhile.
            logger.debug("worker heartbeat not written: %s", exc)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.beat()


_heartbeat: Heartbeat | None = None


@worker_ready.connect
def _start(sender: Any, **kwargs: Any) -> None:
    global _heartbeat
    _heartbeat = Heartbeat(
        sender.hostname,
        concurrency=getattr(sender.controller, "concurrency", 0) or 0,
        queues=sorted(sender.app.amqp.queues),
        every=get_config()["WORKER_HEARTBEAT"],
    )
    _heartbeat.start()


@worker_shutdown.connect
def _stop(**kwargs: Any) -> None:
    if _heartbeat is not None:
        _heartbeat.stop()


def live_workers(now: float | None = None) -> list[dict[str, Any]]:
    """Every worker heard from in the last day, with its state: up, silent
    (missed three beats: dead, hung or cut off) or stopped. Raises
    MemcacheError/OSError when memcached is unreachable."""
    now = time.time() if now is None else now
    client = get_client()
    ids = members(client, REGISTRY, _is_worker_id)
    found = client.get_many([_key(i) for i in ids]) if ids else {}
    gone = {i for i in ids if _key(i) not in found}
    if gone:  # their records expired: a day without a beat
        remove_members(client, REGISTRY, gone)
    workers = []
    for key, raw in found.items():
        value = unseal("workers", key, raw)
        if value is None:
            continue
        try:
            record = _checked(json.loads(value))
        except (ValueError, RecursionError) as exc:
            refused("workers", key, str(exc))
            continue
        if record.get("state") == "up" and now - record["seen"] > MISSED_BEATS * record["every"]:
            record["state"] = "silent"
        record["ago"] = max(now - record["seen"], 0.0)
        workers.append(record)
    return sorted(workers, key=lambda r: (r["state"] != "up", r["hostname"]))
