"""`python -m demofarm.ready HOST:PORT[,HOST:PORT...] -- COMMAND ...`: run
COMMAND once every address accepts connections, or after --timeout seconds
whatever the state.

`make farm` starts nginx this way: started with the web nodes, it would answer
its first visitors 502 while gunicorn is still binding its ports. Once a port
is bound, a request waits in its backlog for the workers to boot instead.
"""

import argparse
import os
import sys
import time

from demofarm.launch import answers


def wait_for_addresses(addresses: list[str], timeout: float, interval: float = 0.1) -> bool:
    """Whether all addresses answered before the timeout."""
    deadline = time.monotonic() + timeout
    waiting = list(addresses)
    while waiting:
        host, _, port = waiting[0].rpartition(":")
        if answers(host, int(port)):
            waiting.pop(0)
        elif time.monotonic() >= deadline:
            return False
        else:
            time.sleep(interval)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("addresses", help="host:port[,host:port...]")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run")
    addresses = [address for address in args.addresses.split(",") if address]
    if not wait_for_addresses(addresses, args.timeout):
        late = f"still waiting for {args.addresses} after {args.timeout:g} s: starting anyway"
        print(late, file=sys.stderr)
    # The command replaces this process, so honcho's signals reach it directly.
    os.execvp(command[0], command)  # noqa: S606 (the command line is ours: demofarm.farm)
    return 1  # not reached: exec replaces this process


if __name__ == "__main__":
    sys.exit(main())
