"""Progress polls through nginx (deploy/nginx), in one run on one machine:

- nginx serving a small static file: the ceiling of this nginx on this machine;
- the Django endpoint (`/progress/<job>/` with a session) behind nginx;
- the fast path (`/progress/<job>/<token>/` answered by nginx from memcached);

each by wrk with BENCH_CONNECTIONS clients, rotating over 100 running jobs that
a publisher process keeps moving (a progress write per job every 0.25 s, each
publishing the fast path's document). Then 1,000 concurrent clients on the
fast path and on the Django endpoint, counting every error. Two gunicorn
nodes, two memcached servers, PostgreSQL.

Then the farm of hosts (tests/harness/hostfarm.py: every role configured from
deploy/), twice in the same run: every host on one machine (all addresses on
one loopback), and every host on its own network namespace, on a bridge. The
same three measurements on each, from a client host: what crossing a network
costs the farm, as a ratio.
"""

import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import requests

from bench.endpoint import CONNECTIONS, DURATION, THREADS, wrk_stats
from tests.harness import hosts, processes
from tests.harness.hostfarm import HOSTS, host_farm

JOBS = int(os.environ.get("BENCH_FARM_JOBS", "100"))
MANY = int(os.environ.get("BENCH_FARM_CLIENTS", "1000"))
MANY_DURATION = os.environ.get("BENCH_FARM_DURATION", "15s")
LUA = Path(__file__).with_name("polls_paths.lua")
STATIC = "/static/webfarm_dashboard/dashboard.css"


def _more_files() -> None:
    # wrk holds a socket per client; a thousand clients need more than 1,024 files.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))


def _wrk(base: str, paths: Path, *, connections: str, duration: str, cookie: str = "") -> dict:
    argv = ["wrk", "-t", THREADS, "-c", connections, "-d", duration, "--timeout", "10s", "--latency"]
    argv += ["-s", str(LUA), base, "--", str(paths)] + ([cookie] if cookie else [])
    out = subprocess.run(
        argv, capture_output=True, text=True, check=True, timeout=600, preexec_fn=_more_files
    ).stdout
    counts = dict(re.findall(r"(\w+)=(\d+)", re.search(r"COUNTS (.*)", out).group(1)))
    socket_errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    return {
        **wrk_stats(out),
        "ok": int(counts["ok"]),
        "fast": int(counts["fast"]),
        "errors": int(counts["other"]) + (sum(map(int, socket_errors.groups())) if socket_errors else 0),
    }


def _writes(state: Path) -> int:
    path = state.with_suffix(".writes")
    return int(path.read_text() or 0) if path.exists() else 0


def run() -> dict:
    if not shutil.which("wrk"):
        sys.exit("wrk is missing: `make bench` installs it")
    workdir = Path(tempfile.mkdtemp(prefix="bench-farm-"))
    with (
        processes.postgres_database("webfarm_bench_farm") as database_url,
        processes.stopped_after(workdir) as started,
    ):
        servers = [processes.memcached(workdir, memory_mb=256) for _ in range(2)]
        started += [process for process, _ in servers]
        addresses = [address for _, address in servers]
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "demofarm.settings",
            "DATABASE_URL": database_url,
            "MEMCACHED_SERVERS": ",".join(addresses),
            "MEMCACHED_NAMESPACE": "benchfarm",
            "DJANGO_SECRET_KEY": uuid.uuid4().hex,
            "TRUSTED_PROXIES": "127.0.0.1",
            "LOG_LEVEL": "WARNING",
        }
        processes.manage(env, "migrate", "--no-input", "-v", "0")
        processes.manage(env, "collectstatic", "--no-input", "-v", "0")
        web = []
        for name in ("web-a", "web-b"):
            node, url = processes.gunicorn(env, workdir, name)
            started.append(node)
            web.append(url)
        balancer, base = processes.nginx(workdir, web=web, memcached=addresses, namespace="benchfarm")
        started.append(balancer)

        state = workdir / "jobs.json"
        argv = [sys.executable, "-m", "bench.farm_publisher", str(JOBS), str(state)]
        publisher = processes.Process("publisher", argv, log_dir=workdir, env=env).start()
        started.append(publisher)
        results, (fast, django, cookie) = _three(base, workdir, state, publisher)
        many = {"connections": str(MANY), "duration": MANY_DURATION}
        before, since = _writes(state), time.monotonic()
        results["fast_many"] = _wrk(base, fast, **many)
        results["django_many"] = _wrk(base, django, cookie=cookie, **many)
        results["writes_per_second"] = (_writes(state) - before) / (time.monotonic() - since)
        assert publisher.alive(), publisher.log()
    results["layouts"] = {"one machine": _on_hosts(one_machine=True), "hosts": _on_hosts(one_machine=False)}
    return results


def _three(base: str, workdir: Path, state: Path, publisher: processes.Process) -> tuple[dict, tuple]:
    """The static file, the Django endpoint and the fast path, each by wrk
    with CONNECTIONS clients, once the publisher's jobs are running."""
    processes.wait_for(lambda: _writes(state) > JOBS or not publisher.alive(), timeout=120, what="publisher")
    assert publisher.alive(), publisher.log()
    published = json.loads(state.read_text())
    cookie = f"sessionid={published['session']}"
    fast = workdir / "fast.txt"
    fast.write_text("".join(f"/progress/{job}/{token}/\n" for job, token in published["jobs"]))
    django = workdir / "django.txt"
    django.write_text("".join(f"/progress/{job}/\n" for job, _ in published["jobs"]))
    static = workdir / "static.txt"
    static.write_text(STATIC + "\n")
    job, token = published["jobs"][0]
    sample = requests.get(f"{base}/progress/{job}/{token}/", timeout=5)
    assert sample.headers.get("X-Progress-Source") == "memcached", sample.headers
    results: dict = {"document_bytes": len(sample.content)}
    results["static_bytes"] = len(requests.get(base + STATIC, timeout=5).content)
    few = {"connections": CONNECTIONS, "duration": DURATION}
    for paths, extra in ((static, {}), (django, {"cookie": cookie}), (fast, {})):
        _wrk(base, paths, connections=CONNECTIONS, duration="2s", **extra)  # warm-up
    results["static"] = _wrk(base, static, **few)
    results["django"] = _wrk(base, django, cookie=cookie, **few)
    results["fast"] = _wrk(base, fast, **few)
    return results, (fast, django, cookie)


def _on_hosts(*, one_machine: bool) -> dict:
    """The three measurements on the farm of hosts, from its client host;
    the publisher runs on a worker host."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-hosts-"))
    try:
        with (
            hosts.lan(HOSTS, one_machine=one_machine) as lan,
            host_farm(lan, workdir, extra={"LOG_LEVEL": "WARNING"}, workers=False, seed=False) as farm,
        ):
            state = workdir / "jobs.json"
            argv = [sys.executable, "-m", "bench.farm_publisher", str(JOBS), str(state)]
            publisher = lan.start("worker1", "publisher", argv, log_dir=workdir, env=farm.env)
            try:
                with lan.inside("client"):  # requests and wrk, from the client host
                    return _three(farm.url, workdir, state, publisher)[0]
            finally:
                publisher.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def report(r: dict) -> str:
    ceiling = r["static"]["rps"]
    lines = [
        f"Progress polls through nginx: 2 gunicorn nodes (2 workers x 2 threads), 2 memcached, "
        f"PostgreSQL, {JOBS} running jobs ({r['writes_per_second']:.0f} progress writes/s)",
        f"wrk -t{THREADS} -c{CONNECTIONS} -d{DURATION}; static file {r['static_bytes']} B, "
        f"progress document {r['document_bytes']} B",
        f"{'':40} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} {'vs static':>9}",
    ]
    rows = [
        ("nginx static file (ceiling)", r["static"]),
        ("Django endpoint /progress/<job>/", r["django"]),
        ("fast path /progress/<job>/<token>/", r["fast"]),
        (f"fast path, {MANY} clients ({MANY_DURATION})", r["fast_many"]),
        (f"Django endpoint, {MANY} clients ({MANY_DURATION})", r["django_many"]),
    ]
    for name, row in rows:
        lines.append(
            f"{name:40} {row['rps']:8.0f} {row['p50']:8.2f} {row['p99']:8.2f} {row['errors']:7d} "
            f"{row['rps'] / ceiling:9.2f}"
        )
    lines.append(
        f"fast path / Django: {r['fast']['rps'] / r['django']['rps']:.1f}x the polls per second "
        f"({r['fast_many']['rps'] / r['django_many']['rps']:.1f}x with {MANY} clients); "
        f"fast-path answers from memcached: {r['fast']['fast']} of {r['fast']['ok']}, "
        f"{r['fast_many']['fast']} of {r['fast_many']['ok']} with {MANY} clients"
    )
    lines += [
        "",
        "The farm of hosts, configured from deploy/ (nodes of 4 gunicorn workers x 4 threads), "
        "from a client host:",
        f"{'':40} {'one machine':>12} {'hosts':>12} {'hosts / one':>12}",
    ]
    one, apart = r["layouts"]["one machine"], r["layouts"]["hosts"]
    for name, key in (("nginx static file", "static"), ("Django endpoint", "django"), ("fast path", "fast")):
        lines.append(
            f"{name + ' (req/s)':40} {one[key]['rps']:12.0f} {apart[key]['rps']:12.0f} "
            f"{apart[key]['rps'] / one[key]['rps']:12.2f}"
        )
        lines.append(f"{name + ' (p99 ms)':40} {one[key]['p99']:12.2f} {apart[key]['p99']:12.2f}")
        errors = one[key]["errors"] + apart[key]["errors"]
        if errors:
            lines.append(f"{name + ' (errors)':40} {one[key]['errors']:12d} {apart[key]['errors']:12d}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run()))
