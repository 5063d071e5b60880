"""Reading an env's own options (`--env-option KEY=VALUE`): they arrive as strings (or as typed
defaults), and a bad one fails the env's construction with a ValueError naming the env, the
option and what was expected, before the server serves anything."""

from __future__ import annotations


def int_option(env: str, name: str, value: str | int, low: int) -> int:
    """`value` as an integer of at least `low`."""
    try:
        out = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{env} option {name}={value!r}: expected an integer") from None
    if out < low:
        raise ValueError(f"{env} option {name}={out}: must be >= {low}")
    return out


def float_option(env: str, name: str, value: str | float, low: float) -> float:
    """`value` as a number of at least `low`."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{env} option {name}={value!r}: expected a number") from None
    if out < low:
        raise ValueError(f"{env} option {name}={out}: must be >= {low}")
    return out


def flag_option(env: str, name: str, value: str | bool) -> bool:
    """`value` as a boolean (true/false, 1/0, yes/no, on/off)."""
    if isinstance(value, bool):
        return value
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{env} option {name}={value!r}: expected true or false")
