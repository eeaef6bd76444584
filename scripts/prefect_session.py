"""One Prefect server for a whole command: ``python -m scripts.prefect_session -- dvc repro ...``.

Without ``PREFECT_API_URL`` every stage process starts Prefect's temporary server of its own
(seconds of start-up per stage, and no UI to watch). This wrapper starts one local server
(``prefect server start``) on a free port of 127.0.0.1, waits until ``/api/health`` answers,
runs the command with ``PREFECT_API_URL`` pointing at it (so every stage ``dvc repro`` starts
reports its flow and task runs there, visible in the UI whose address is printed), and stops
the server when the command ends, fails or is interrupted (SIGINT / SIGTERM are passed to the
command first). The server keeps its runs in Prefect's usual database (``$PREFECT_HOME``,
``~/.prefect`` by default), so ``make ui`` shows them afterwards.

When ``PREFECT_API_URL`` is already set (a server the user started, e.g. ``make ui``), the
command runs against it and nothing is started. The exit status is the command's.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence

STARTUP_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 15.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_healthy(api_url: str, server: subprocess.Popen[bytes], timeout_s: float) -> None:
    """Poll ``<api_url>/health`` until it answers 200; raise if the server exits or is late."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the Prefect server exited with status {server.returncode} "
                               "before answering (run `prefect server start` to see why)")
        try:
            with urllib.request.urlopen(f"{api_url}/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"the Prefect server did not answer {api_url}/health within {timeout_s:.0f} s")


def start_server(port: int) -> subprocess.Popen[bytes]:
    """``prefect server start`` on 127.0.0.1:``port`` in its own process group, output quiet."""
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    env.pop("PREFECT_API_URL", None)
    return subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
         "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group, then SIGKILL it if it is still there after a grace period."""
    if process.poll() is not None:
        return
    for sig, wait_s in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def run_command(command: Sequence[str], env: dict[str, str]) -> int:
    """Run ``command`` in a process group of its own; a SIGINT / SIGTERM received meanwhile is
    passed on to that whole group (``dvc`` and the stage it runs, as a terminal's Ctrl-C reaches
    every process of the foreground group), and the wrapper waits for the command to end.

    The handlers are installed before the command starts: a wrapper started with SIGINT ignored
    (any ``cmd &`` of a non-interactive shell) would otherwise pass the ignored disposition on to
    the command, whose processes would then ignore the forwarded SIGINT."""
    started: list[subprocess.Popen[bytes]] = []

    def forward(signum: int, _frame: object) -> None:
        if started and started[0].poll() is None:
            try:
                os.killpg(started[0].pid, signum)
            except ProcessLookupError:
                pass

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        started.append(subprocess.Popen(list(command), env=env, start_new_session=True))
        return started[0].wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given: python -m scripts.prefect_session -- dvc repro ...")
    if os.environ.get("PREFECT_API_URL"):
        return run_command(command, dict(os.environ))
    port = free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    server = start_server(port)
    try:
        wait_healthy(api_url, server, STARTUP_TIMEOUT_S)
        print(f"Prefect server for this run: UI http://127.0.0.1:{port}  (PREFECT_API_URL={api_url})",
              flush=True)
        return run_command(command, {**os.environ, "PREFECT_API_URL": api_url})
    finally:
        stop(server)


if __name__ == "__main__":
    sys.exit(main())
