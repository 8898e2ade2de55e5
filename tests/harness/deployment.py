"""deploy/ read the way a machine reads it: the environment file systemd
loads, the units' ExecStart lines, memcached's config file. A test farm of
hosts is configured from these alone, rendered for each host, so a setting the
deployment forgot, or one that silently assumes one machine, breaks the test.
"""

import os
import re
import shlex
import shutil
from pathlib import Path

from tests.harness.processes import BIN, ROOT

DEPLOY = ROOT / "deploy"
# Where the units say the application is installed, and where it is here.
INSTALLED = "/srv/webfarm"
STATE = "/var/lib/webfarm"  # StateDirectory=webfarm
_LINE = re.compile(r"^([A-Z][A-Z0-9_]*)=(.*)$")


def render_env_file(values: dict[str, str], *, extra: dict[str, str] | None = None) -> str:
    """deploy/webfarm.env.example with every variable it sets given a value
    of this farm's (each must be given: the example names what a farm must
    decide), then `extra` settings."""
    lines, missing = [], []
    for line in (DEPLOY / "webfarm.env.example").read_text().splitlines():
        match = _LINE.match(line)
        if match:
            name = match.group(1)
            if name not in values:
                missing.append(name)
                continue
            line = f"{name}={values[name]}"
        lines.append(line)
    if missing:
        raise KeyError(f"the farm gives no value for {missing} (deploy/webfarm.env.example sets them)")
    lines += ["", "# This farm's own settings."] + [f"{k}={v}" for k, v in (extra or {}).items()]
    return "\n".join(lines) + "\n"


def read_env_file(path: Path) -> dict[str, str]:
    """An EnvironmentFile= as systemd reads it: KEY=VALUE lines, # comments."""
    env = {}
    for line in path.read_text().splitlines():
        match = _LINE.match(line.strip())
        if match:
            env[match.group(1)] = match.group(2)
    return env


def process_env(env_file: Path) -> dict[str, str]:
    """What a unit's process gets: systemd's bare environment and the file,
    nothing of the test's own."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": os.environ.get("HOME", "/root"),
        "PYTHONUNBUFFERED": "1",
        **read_env_file(env_file),
    }


def unit_command(unit: str, instance: str = "", *, state: Path) -> list[str]:
    """The ExecStart of deploy/systemd/<unit>, its specifiers filled in
    (%i the instance; %% a percent sign), the install path mapped to this
    checkout and the StateDirectory to `state`."""
    text = (DEPLOY / "systemd" / unit).read_text().replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    command = line.removeprefix("ExecStart=").replace("%i", instance).replace("%%", "%")
    command = command.replace(f"{INSTALLED}/.venv/bin", str(BIN)).replace(INSTALLED, str(ROOT))
    command = command.replace(STATE, str(state))
    return shlex.split(command)


def memcached_command(listen: str) -> list[str]:
    """memcached with the options of deploy/memcached/memcached.conf (one
    per line, as Debian's package reads them), listening on `listen`."""
    argv = [shutil.which("memcached") or "memcached"]
    for line in (DEPLOY / "memcached" / "memcached.conf").read_text().splitlines():
        line = line.strip()
        if not line.startswith("-"):
            continue  # comments, and the package's own "logfile"
        flag, _, value = line.partition(" ")
        if flag == "-l":
            value = listen
        elif flag == "-u" and os.geteuid() == 0 and not _user_exists(value):
            value = "root"
        argv += [flag, value] if value else [flag]
    return argv


def _user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
