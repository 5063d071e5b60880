"""The run's shared secret: made, stored, found, and required where the wire leaves the host.

Every process of a run (learner, rollout servers) holds the same secret; the group stream (Rust,
`agentgym-transport`) and the weight stream (`weights/signing.py`) sign every message with
HMAC-SHA256 under it. Where it comes from, first match wins:

1. `secret_file` in the process's config (`auth.secret_file`): a file written by
   `agentgym-rl secret PATH` (mode 0600; a file others may read is refused);
2. the environment variable `AGENTGYM_RL_SECRET` (its value is the secret; `train` sets it for
   the processes it starts, with a new secret per run).

Never from the command line (it would show in `ps`). A process that binds or connects a wire
beyond this host without a secret refuses to start (`check_exposure`), unless its config says
`auth.allow_unauthenticated: true`, which logs a warning instead.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

ENV_VAR = "AGENTGYM_RL_SECRET"
MIN_LENGTH = 16
"""Shortest secret accepted, in bytes (the transport refuses shorter ones too)."""

HOW_TO_MAKE_ONE = (
    "make one with `agentgym-rl secret runs/secret` (a new random secret in a file of mode "
    "0600), copy that file to every machine of the run and name it in each process's config "
    f"(`auth: {{secret_file: runs/secret}}`), or set {ENV_VAR} in their environment"
)


class SecretError(ValueError):
    """The secret is missing where it is required, unreadable, or unfit."""


def new_secret() -> str:
    """A new random secret: 64 hex digits (256 bits)."""
    return secrets.token_hex(32)


def write_secret_file(path: Path, *, overwrite: bool = False) -> Path:
    """Write a new secret to `path`, readable by its owner only (created 0600, never widened
    first). An existing file is kept unless `overwrite`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        raise SecretError(f"{path} exists; pass --force to replace its secret") from None
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(new_secret() + "\n")
    return path


def kept_secret(path: Path) -> str:
    """The secret in `path`, made there (0600) on first use: a launched run's, kept in its run
    folder for its requeued and resumed jobs. Refused as `read_secret` refuses a file."""
    if not path.exists():
        with contextlib.suppress(SecretError):  # two starts at once: the other one wrote it
            write_secret_file(path)
    return _from_file(path).decode()


def _from_file(path: Path) -> bytes:
    try:
        mode = path.stat().st_mode
        text = path.read_text().strip()
    except OSError as e:
        raise SecretError(f"cannot read the secret file {path}: {e.strerror}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SecretError(
            f"the secret file {path} may be read by others (mode {stat.S_IMODE(mode):o}): "
            f"run `chmod 600 {path}`"
        )
    return _fit(text, str(path))


def _fit(text: str, where: str) -> bytes:
    raw = text.strip().encode()
    if len(raw) < MIN_LENGTH:
        raise SecretError(
            f"the secret in {where} has {len(raw)} bytes; at least {MIN_LENGTH} are needed "
            f"({HOW_TO_MAKE_ONE})"
        )
    return raw


def read_secret(secret_file: Path | None) -> bytes | None:
    """The secret named by a config's `secret_file`, else `AGENTGYM_RL_SECRET`, else None."""
    if secret_file is not None:
        return _from_file(secret_file)
    value = os.environ.get(ENV_VAR)
    return _fit(value, f"${ENV_VAR}") if value else None


def is_local_endpoint(endpoint: str) -> bool:
    """Whether a ZeroMQ endpoint stays on this host: `ipc://`, or tcp on a loopback address.
    `tcp://*:PORT` and `tcp://0.0.0.0:PORT` bind every interface: not local."""
    if endpoint.startswith(("ipc://", "inproc://")):
        return True
    host = endpoint.removeprefix("tcp://").rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # "*", an interface or a host name


def check_exposure(
    secret: bytes | None, endpoints: Iterable[str], *, allow_unauthenticated: bool, role: str
) -> None:
    """Refuse (`SecretError`) to run without a secret on an endpoint beyond this host; with
    `allow_unauthenticated`, warn instead."""
    if secret is not None:
        return
    exposed = sorted({e for e in endpoints if not is_local_endpoint(e)})
    if not exposed:
        return
    if allow_unauthenticated:
        log.warning(
            "%s: no secret, and %s reach beyond this host: anyone who reaches them can feed "
            "this run (auth.allow_unauthenticated is set)",
            role,
            ", ".join(exposed),
        )
        return
    raise SecretError(
        f"{role}: {', '.join(exposed)} reach beyond this host, and no secret signs the "
        f"messages on them: {HOW_TO_MAKE_ONE}. To run unauthenticated anyway, set "
        "`auth: {allow_unauthenticated: true}` in the config."
    )


def secret_for(
    secret_file: Path | None,
    endpoints: Iterable[str],
    *,
    allow_unauthenticated: bool,
    role: str,
) -> bytes | None:
    """A process's secret (`read_secret`), checked against the endpoints it uses
    (`check_exposure`); raises `SecretError` with what to do."""
    secret = read_secret(secret_file)
    check_exposure(secret, endpoints, allow_unauthenticated=allow_unauthenticated, role=role)
    return secret
