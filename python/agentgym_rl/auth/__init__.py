"""Who may speak on the run's wires: the per-run secret that signs every group and weight
message (`secret`), and the log of messages refused for want of it (`refusals`). Torch-free."""

from agentgym_rl.auth.refusals import RefusalLog
from agentgym_rl.auth.secret import (
    ENV_VAR,
    SecretError,
    check_exposure,
    is_local_endpoint,
    kept_secret,
    new_secret,
    read_secret,
    secret_for,
    write_secret_file,
)

__all__ = [
    "ENV_VAR",
    "RefusalLog",
    "SecretError",
    "check_exposure",
    "is_local_endpoint",
    "kept_secret",
    "new_secret",
    "read_secret",
    "secret_for",
    "write_secret_file",
]
