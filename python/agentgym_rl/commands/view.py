"""`agentgym-rl view RUN_DIR`: a local web page to browse a run's episodes while it goes.

Only argparse runs at parse time. Exit codes: 0 stopped (Ctrl-C), 2 bad input (no such folder,
an unreadable token file, a port in use), each with one message naming the fix.
"""

from __future__ import annotations

import argparse
import sys

NAME = "view"
HELP = "browse a run's episodes, trained tokens and credit in a web page"
CHILDREN = ""  # it serves in-process
DESCRIPTION = (
    "Serves a page over a run folder (finished or still being written): an overview (held-out "
    "and training success per env beside chance and the rule, turns, throughput, staleness), "
    "the episodes table (filter by env, split, version, outcome, turns, invalid turns, drift, "
    "forks, task; paginated, so a run of a million episodes opens at once), one episode as the "
    "model saw it (trained tokens highlighted, per-turn advantage, reward, log-prob and policy "
    "version, as `agentgym-rl show` prints it) and one task's held-out episodes at each "
    "evaluated version. Loopback by default; bound elsewhere, the page asks for the run's "
    "token (its secret: --token-file or AGENTGYM_RL_SECRET; else a new one, printed)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (or a log folder)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    parser.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: a free one)")
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        help="the run's secret file (`agentgym-rl secret`): its value is the page's token when "
        "bound beyond loopback",
    )
    parser.add_argument(
        "--model", metavar="DIR", help="tokenizer folder (default: the one the log names)"
    )


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from agentgym_rl.auth.secret import SecretError, is_local_endpoint, new_secret, read_secret

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        print(f"view: {run_dir}: no such run folder", file=sys.stderr)
        return 2
    token = None
    if not is_local_endpoint(f"tcp://{args.host}:{args.port}"):
        try:
            secret = read_secret(Path(args.token_file) if args.token_file else None)
        except SecretError as e:
            print(f"view: {e}", file=sys.stderr)
            return 2
        token = secret.decode("utf-8", "replace") if secret else new_secret()
    return _serve(run_dir, args.host, args.port, token, args.model)


def _serve(run_dir: object, host: str, port: int, token: str | None, model: str | None) -> int:
    import threading
    from pathlib import Path

    import uvicorn

    from agentgym_rl.processes.ports import free_port
    from agentgym_rl.viewer.app import ViewerApp
    from agentgym_rl.viewer.page_data import RunView

    view = RunView(Path(str(run_dir)), model)
    stop = threading.Event()

    def index_on() -> None:  # totals for the table and the overview, a run's growth followed
        while not stop.is_set():
            view.refresh_logs()
            # short turns: a page's request waits for the index's lock at most this long
            view.index.grow(budget_s=0.1)
            stop.wait(0.01 if not view.index.complete else 2.0)

    threading.Thread(target=index_on, name="view-index", daemon=True).start()
    port = port or free_port(host=host)
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    address = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    print(f"view: {run_dir} at {address}  (Ctrl-C stops)", flush=True)
    config = uvicorn.Config(
        ViewerApp(view, token), host=host, port=port, log_level="warning", access_log=False
    )
    server = uvicorn.Server(config)
    try:
        server.run()
    finally:
        stop.set()
    if not server.started:
        print(f"view: could not listen on {host}:{port} (in use? pass --port)", file=sys.stderr)
        return 2
    return 0
