"""Command-line options of an env server, shared by `agentgym-rl env serve` and
`python -m agentgym_envs.server`. Stdlib only: the server stack is imported after parsing."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the `serve` arguments (env name, bind address, ports, limits) to `parser`."""
    parser.add_argument(
        "name",
        help="environment to serve: a name `env list` shows, or a reference "
        "package.module:Class to an Environment subclass of your own",
    )
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=36001, help="HTTP port (AgentGym protocol)")
    parser.add_argument(
        "--zmq-port",
        type=int,
        default=None,
        help="ZeroMQ ROUTER port (native protocol; off if unset)",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="close episodes unused for S seconds (0 disables; default 600)",
    )
    parser.add_argument(
        "--max-obs-chars",
        type=int,
        default=16_000,
        help="truncate longer observations with a visible marker (default 16000, min 200)",
    )
    parser.add_argument(
        "--call-timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="exit (code 75, for a restart) when one call into the env runs longer than S "
        "seconds: a hung env (0 disables; default 300)",
    )
    parser.add_argument(
        "--log-level", default="warning", choices=["debug", "info", "warning", "error"]
    )
    parser.add_argument(
        "--step-latency-ms",
        type=float,
        default=0.0,
        metavar="MS",
        help="benchmarks: delay each step reply by a log-normal time with this median (default 0)",
    )
    parser.add_argument(
        "--env-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the environment itself (repeatable), e.g. observation=compact for "
        "babyai",
    )
    parser.add_argument(
        "--step-latency-sigma",
        type=float,
        default=1.0,
        help="shape of the injected step latency; larger = longer tail (default 1.0)",
    )


def serve_from_args(args: argparse.Namespace) -> int:
    """Run the server described by parsed `args` until SIGTERM/SIGINT; returns the exit code."""
    from agentgym_envs.server.app import ServeOptions, serve

    return serve(
        ServeOptions(
            name=args.name,
            host=args.host,
            port=args.port,
            zmq_port=args.zmq_port,
            idle_timeout_s=args.idle_timeout,
            call_timeout_s=args.call_timeout,
            max_obs_chars=max(200, args.max_obs_chars),
            log_level=args.log_level,
            step_latency_ms=args.step_latency_ms,
            step_latency_sigma=args.step_latency_sigma,
            env_options=parse_env_options(args.env_option),
        )
    )


def parse_env_options(items: Sequence[str]) -> dict[str, str]:
    """`["observation=compact"]` -> `{"observation": "compact"}` (argparse error on bad form)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--env-option {item!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m agentgym_envs.server NAME [options]`."""
    parser = argparse.ArgumentParser(prog="python -m agentgym_envs.server")
    add_serve_arguments(parser)
    return serve_from_args(parser.parse_args(argv))
