"""One key on a machine: with DJANGO_SECRET_KEY unset, as `make run` leaves it,
the web node and a `manage.py` command run by hand beside it read the same
machine key (DJANGO_SECRET_KEY_FILE), so the command reads and writes what
the farm reads and writes. A command with another key says what it cannot
read, and why."""

import subprocess
import uuid

import pytest
import requests

from tests.harness import processes
from tests.harness.processes import BIN, ROOT, wait_for

pytestmark = pytest.mark.farm

TOKEN = "one-key-token"


def test_a_command_by_hand_beside_the_farm_reads_and_writes_what_it_does(tmp_path):
    with processes.stopped_after() as started:
        mc, address = processes.memcached(tmp_path)
        started.append(mc)
        env = processes.one_memcached_env(
            tmp_path,
            address,
            "onekey",
            DEMO_ORDERS=200,
            QUEUE_API_TOKEN=TOKEN,
            QUEUES_MAX_DELIVERIES=1,
            DJANGO_SECRET_KEY_FILE=str(tmp_path / "var" / "secret_key"),
        )
        env["DJANGO_SECRET_KEY"] = ""  # unset, as make run leaves it
        processes.manage(env, "migrate", "--no-input", "-v", "0")
        web, base = processes.gunicorn(env, tmp_path, "onekey-web")
        started.append(web)
        bearer = {"Authorization": f"Bearer {TOKEN}"}

        # The farm's site log, drained by hand: every record read, none dead.
        for path in ("/accounts/login/", "/polls/"):
            requests.get(base + path, timeout=10)
        wait_for(
            lambda: processes.manage(env, "drain_sitelog") and "GET /polls/" in _log(tmp_path),
            timeout=30,
            what="the farm's log records drained by hand",
        )
        assert processes.manage(env, "dead_letters", "sitelog").startswith("0 dead letters of sitelog")

        # A dead letter of the farm's, listed and put back by hand, delivered by the farm.
        assert requests.post(f"{base}/queues/inbox/", data=b"by the farm", headers=bearer, timeout=10).ok
        got = requests.get(f"{base}/queues/inbox/", headers=bearer, timeout=10)
        rejected = requests.post(
            f"{base}/queues/inbox/reject/", headers={**bearer, "Queue-Receipt": got.headers["Queue-Receipt"]}
        )
        assert rejected.json()["dead_letter"] is True
        shown = processes.manage(env, "dead_letters", "http.inbox")
        assert shown.startswith("1 dead letters of http.inbox") and "by the farm" in shown
        processes.manage(env, "dead_letters", "http.inbox", "--requeue")
        again = requests.get(f"{base}/queues/inbox/", headers=bearer, timeout=10)
        assert again.status_code == 200 and again.content == b"by the farm"

        # Another key (a command run with a farm's variable that is not this one's): said, not hidden.
        assert requests.post(
            f"{base}/queues/inbox/reject/",
            headers={**bearer, "Queue-Receipt": again.headers["Queue-Receipt"]},
        ).ok
        other = {**env, "DJANGO_SECRET_KEY": "another-farms-key-" + uuid.uuid4().hex}
        result = subprocess.run(
            [str(BIN / "python"), "manage.py", "dead_letters", "http.inbox"],
            cwd=ROOT,
            env=other,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode != 0
        assert "cannot be read" in result.stderr and "DJANGO_SECRET_KEY" in result.stderr


def _log(tmp_path) -> str:
    path = tmp_path / "activity.log"
    return path.read_text() if path.exists() else ""
