"""Pure-Python codec of group messages (schema versions 1 to 3), independent of the Rust codec.

Decoding uses ``msgpack`` and ``numpy.frombuffer``: arrays are read-only views of the binary
fields, not copies. Errors raise the same exception classes as the Rust codec
(``agentgym_rl._core.WireFormatError`` and its subclasses). The layout is documented in
``crates/agentgym-wire/src/codec.rs``.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np
import numpy.typing as npt

from agentgym_rl._core import (
    InconsistentLengthError,
    InvalidValueError,
    MalformedMessageError,
    MissingFieldError,
    SchemaVersionError,
    TruncatedMessageError,
)
from agentgym_rl.wire.types import Status, WireGroup, WireSample, WireTokens

SCHEMA_VERSION = 3
"""The newest version read and written; every older one is read too, and a group is written as
the oldest version that holds it (as the Rust encoder does: `_version_of`)."""

# field -> (numpy dtype, accepted dtype strings, columns or None for 1-D)
_ARRAYS: dict[str, tuple[type, tuple[str, ...], int | None]] = {
    "input_ids": (np.uint32, ("<u4",), None),
    "loss_mask": (np.uint8, ("|u1", "<u1", "u1"), None),
    "logprobs": (np.float32, ("<f4",), None),
    "versions": (np.uint32, ("<u4",), None),
    "turn_spans": (np.uint32, ("<u4",), 2),
    "turn_rewards": (np.float32, ("<f4",), None),
    "turn_keys": (np.uint32, ("<u4",), None),
}
_DTYPE_STR = {
    "input_ids": "<u4",
    "loss_mask": "|u1",
    "logprobs": "<f4",
    "versions": "<u4",
    "turn_rewards": "<f4",
    "turn_keys": "<u4",
}


def _get(d: Any, key: str) -> Any:
    if not isinstance(d, dict):
        raise MalformedMessageError(f"expected a map holding {key!r}, found {type(d).__name__}")
    try:
        return d[key]
    except KeyError:
        raise MissingFieldError(f"missing field `{key}`") from None


def _typed(value: Any, kind: type | tuple[type, ...], key: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise MalformedMessageError(f"`{key}` has type {type(value).__name__}")
    return value


def _array(d: Any, key: str) -> npt.NDArray[Any]:
    dtype, accepted, cols = _ARRAYS[key]
    a = _get(d, key)
    dt, shape, data = _get(a, "dtype"), _get(a, "shape"), _get(a, "data")
    if dt not in accepted:
        raise MalformedMessageError(f"`{key}` has dtype {dt!r}, expected {accepted[0]!r}")
    if not isinstance(shape, list) or not all(
        isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in shape
    ):
        raise MalformedMessageError(f"`{key}` has shape {shape!r}")
    if cols is None and len(shape) != 1:
        raise MalformedMessageError(f"`{key}` has shape {shape}, expected [n]")
    if cols is not None and shape != [0] and (len(shape) != 2 or shape[1] != cols):
        raise MalformedMessageError(f"`{key}` has shape {shape}, expected [k, {cols}]")
    _typed(data, bytes, key)
    itemsize = np.dtype(dtype).itemsize
    n = shape[0] * (shape[1] if len(shape) == 2 else 1)
    if n * itemsize != len(data):
        raise InconsistentLengthError(
            f"inconsistent length of `{key}`: expected {n * itemsize}, found {len(data)}"
        )
    arr = np.frombuffer(data, dtype=np.dtype(dtype).newbyteorder("<"))
    return arr.reshape(-1, cols) if cols is not None else arr


def _tokens(t: Any) -> WireTokens:
    tokens = WireTokens(
        input_ids=_array(t, "input_ids"),
        loss_mask=_array(t, "loss_mask"),
        logprobs=_array(t, "logprobs"),
        versions=_array(t, "versions"),
        turn_spans=_array(t, "turn_spans"),
    )
    n = len(tokens)
    for key in ("loss_mask", "logprobs", "versions"):
        found = int(getattr(tokens, key).shape[0])
        if found != n:
            raise InconsistentLengthError(
                f"inconsistent length of `{key}`: expected {n}, found {found}"
            )
    spans = tokens.turn_spans
    if spans.size and (bool((spans[:, 0] > spans[:, 1]).any()) or int(spans.max()) > n):
        raise InvalidValueError(f"invalid `turn_spans`: a span is not within [0, {n}]")
    return tokens


def _uint(d: Any, key: str, bits: int = 32) -> int:
    v = _typed(_get(d, key), int, key)
    if not 0 <= v < 1 << bits:
        raise MalformedMessageError(f"`{key}` = {v} does not fit in u{bits}")
    return int(v)


def _sample(s: Any) -> WireSample:
    status = _typed(_get(s, "status"), str, "status")
    try:
        st = Status(status)
    except ValueError:
        raise InvalidValueError(f"invalid `status`: unknown status {status!r}") from None
    tokens = _tokens(_get(s, "tokens"))
    per_turn = {k: _array(s, k) for k in ("turn_rewards", "turn_keys") if k in s}
    turns = int(tokens.turn_spans.shape[0])
    for key, arr in per_turn.items():
        if arr.shape[0] not in (0, turns):
            raise InconsistentLengthError(
                f"inconsistent length of `{key}`: expected {turns}, found {arr.shape[0]}"
            )
    rewards = per_turn.get("turn_rewards")
    if rewards is not None and not bool(np.isfinite(rewards).all()):
        raise InvalidValueError("invalid `turn_rewards`: must be finite")
    return WireSample(
        tokens=tokens,
        reward=float(_typed(_get(s, "reward"), (int, float), "reward")),
        status=st,
        drift=_typed(_get(s, "drift"), bool, "drift"),
        turns=_uint(s, "turns"),
        turn_cap=_uint(s, "turn_cap"),
        stage=_uint(s, "stage"),
        dispatch_version=_uint(s, "dispatch_version"),
        request_id=_typed(s.get("request_id", ""), str, "request_id"),
        episode=_uint(s, "episode") if "episode" in s else None,
        **per_turn,
    )


def _check_episodes(samples: list[WireSample]) -> None:
    """Samples name their episodes all or none, in order from 0 with none skipped."""
    named = [s.episode for s in samples if s.episode is not None]
    if named and len(named) != len(samples):
        raise InvalidValueError(
            f"invalid `episode`: {len(named)} of {len(samples)} samples name their episode"
        )
    last: int | None = None
    for e in named:
        nxt = 0 if last is None else last + 1
        if e != last and e != nxt:
            raise InvalidValueError(
                f"invalid `episode`: episode {e} where {nxt} or the same as before was next"
            )
        last = e


def _version_of(group: WireGroup) -> int:
    if any(s.episode is not None for s in group.samples):
        return 3
    return 2 if any(s.has_turn_arrays for s in group.samples) else 1


def decode_group(data: bytes) -> WireGroup:
    """Decode one group message. Raises a ``WireFormatError`` subclass on bad input."""
    try:
        obj = msgpack.unpackb(data, raw=False)
    except (msgpack.OutOfData, ValueError) as e:
        if isinstance(e, msgpack.OutOfData) or "incomplete" in str(e).lower():
            raise TruncatedMessageError(f"truncated message: {e}") from None
        raise MalformedMessageError(f"malformed message: {e}") from None
    except Exception as e:  # msgpack's FormatError/StackError and friends
        raise MalformedMessageError(f"malformed message: {e}") from None
    if not isinstance(obj, dict) or "v" not in obj:
        raise MissingFieldError("missing field `v`")
    if type(obj["v"]) is not int or obj["v"] not in range(1, SCHEMA_VERSION + 1):
        raise SchemaVersionError(
            f"unsupported wire schema version {obj['v']} "
            f"(this build reads versions 1 to {SCHEMA_VERSION})"
        )
    samples = [_sample(s) for s in _typed(_get(obj, "samples"), list, "samples")]
    _check_episodes(samples)
    return WireGroup(
        group_id=_uint(obj, "group_id", 64),
        task_id=_typed(_get(obj, "task_id"), str, "task_id"),
        env=_typed(_get(obj, "env"), str, "env"),
        samples=samples,
    )


def _pack_array(key: str, arr: npt.NDArray[Any]) -> dict[str, Any]:
    dtype = _ARRAYS[key][0]
    a = np.ascontiguousarray(arr, dtype=np.dtype(dtype).newbyteorder("<"))
    if key == "turn_spans":
        a = a.reshape(-1, 2)
        dt = "<u4"
    else:
        dt = _DTYPE_STR[key]
    return {"dtype": dt, "shape": list(a.shape), "data": a.tobytes()}


def encode_group(group: WireGroup) -> bytes:
    """Encode a group; byte-identical to the Rust encoder for the same values."""
    _check_episodes(group.samples)
    samples = []
    for s in group.samples:
        t = s.tokens
        named: dict[str, Any] = {"request_id": s.request_id} if s.request_id else {}
        for key in ("turn_rewards", "turn_keys"):  # version 2, each only when given
            if getattr(s, key).size:
                named[key] = _pack_array(key, getattr(s, key))
        if s.episode is not None:  # version 3
            named["episode"] = int(s.episode)
        samples.append(
            {
                "tokens": {
                    k: _pack_array(k, getattr(t, k))
                    for k in ("input_ids", "loss_mask", "logprobs", "versions", "turn_spans")
                },
                "reward": float(s.reward),
                "status": Status(s.status).value,
                "drift": bool(s.drift),
                "turns": int(s.turns),
                "turn_cap": int(s.turn_cap),
                "stage": int(s.stage),
                "dispatch_version": int(s.dispatch_version),
                **named,  # written only when set, as the Rust encoder does
            }
        )
    msg = {
        "v": _version_of(group),
        "group_id": int(group.group_id),
        "task_id": group.task_id,
        "env": group.env,
        "samples": samples,
    }
    packed: bytes = msgpack.packb(msg, use_bin_type=True, use_single_float=True)
    return packed
