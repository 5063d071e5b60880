"""A cheap stand-in for a supervised child (env server, learner or rollout server) in the
supervisor tests. Behaviour by flag: serve /health, listen on ports, write learner metrics and
exit 0 (once another stand-in is ready, perhaps after lingering), exit 0 once a file exists,
finish its last step when told to stop, crash after
printing lines, crash only on its first
start, ignore SIGTERM, leave a grandchild in its process group. Every SIGTERM received is
appended to `--order` as its name."""

from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"ok": true}')

    def log_message(self, *args: object) -> None:
        pass


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--name", required=True)
    p.add_argument("--order", type=Path, required=True)
    p.add_argument("--health", type=int)
    p.add_argument("--listen", type=int, action="append", default=[])
    p.add_argument("--steps", type=int, default=0, help="write this many learner records, exit 0")
    p.add_argument("--metrics", type=Path)
    p.add_argument("--crash", type=int, help="print --lines lines, then exit with this code")
    p.add_argument("--lines", type=int, default=40)
    p.add_argument("--crash-once", type=Path, help="crash only when this marker does not exist")
    p.add_argument("--ignore-term", action="store_true")
    p.add_argument("--grandchild", type=Path, help="start `sleep` in our group, write its pid")
    p.add_argument("--ready", type=Path, help="touch this file once ready")
    p.add_argument("--after", type=Path, help="write the --steps records once this file exists")
    p.add_argument("--linger", type=float, default=0.0, help="after --steps, wait this long")
    p.add_argument("--done", type=Path, help="touch this file once --steps are written")
    p.add_argument("--exit-when", type=Path, help="exit 0 once this file exists")
    p.add_argument(
        "--finish-on-term", type=int, default=0, help="on SIGTERM: write steps 1..N, exit 0"
    )
    a = p.parse_args()

    stop = threading.Event()

    def on_term(*_: object) -> None:
        with a.order.open("a") as f:
            f.write(a.name + "\n")
        if not a.ignore_term:
            stop.set()

    signal.signal(signal.SIGTERM, on_term)
    if a.grandchild:
        child = subprocess.Popen(["sleep", "1000"])
        a.grandchild.write_text(str(child.pid))
    if a.health:
        server = ThreadingHTTPServer(("127.0.0.1", a.health), _Health)
        threading.Thread(target=server.serve_forever, daemon=True).start()
    sockets = []
    for port in a.listen:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()
        sockets.append(s)
    crash = a.crash is not None and not (a.crash_once and a.crash_once.exists())
    if a.crash_once:
        a.crash_once.touch()
    if crash:
        for i in range(a.lines):
            print(f"{a.name} line {i}", flush=True)
        return int(a.crash)
    if a.ready:
        a.ready.touch()
    # A loaded box may start the rollout stand-in after a fast learner has finished: without
    # this wait, its SIGTERM would arrive before the handler that records it is installed.
    while a.after is not None and not a.after.exists():
        time.sleep(0.05)
    for step in range(1, a.steps + 1):
        assert a.metrics is not None
        a.metrics.parent.mkdir(parents=True, exist_ok=True)
        with a.metrics.open("a") as f:
            f.write(json.dumps({"step": step, "tokens_per_s": 100.0, "reward_mean": 0.5}) + "\n")
        time.sleep(0.2)
    if a.done:
        a.done.touch()
    if a.steps:
        time.sleep(a.linger)  # a learner saving its last step
        return 0
    while a.exit_when is not None and not a.exit_when.exists():
        time.sleep(0.05)
    if a.exit_when:
        return 0
    while not stop.wait(0.05):
        pass
    for step in range(1, a.finish_on_term + 1):  # the last step was in hand when told to stop
        assert a.metrics is not None
        a.metrics.parent.mkdir(parents=True, exist_ok=True)
        with a.metrics.open("a") as f:
            f.write(json.dumps({"step": step, "tokens_per_s": 100.0, "reward_mean": 0.5}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
