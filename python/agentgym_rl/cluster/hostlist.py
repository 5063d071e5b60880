"""SLURM's compressed host lists, expanded as `scontrol show hostnames` does.

Contract: `expand_hostlist("gpu[01-03,07],login1")` is `["gpu01", "gpu02", "gpu03", "gpu07",
"login1"]`: names separated by commas outside brackets; each bracket holds comma-separated
numbers or ranges whose zero padding is kept (`[08-10]` gives 08, 09, 10); several bracket
groups in one name multiply out in order (`r[1-2]n[1-2]`: r1n1, r1n2, r2n1, r2n2). A malformed
list raises `ValueError` naming it; duplicates are kept (SLURM never lists a node twice).
"""

from __future__ import annotations

import itertools
import re

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _split_top(text: str) -> list[str]:
    """`text` split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        if depth not in (0, 1):
            raise ValueError(f"host list {text!r}: brackets do not pair up")
    if depth:
        raise ValueError(f"host list {text!r}: brackets do not pair up")
    parts.append(text[start:])
    return parts


def _numbers(body: str, text: str) -> list[str]:
    """The numbers of one bracket body (`01-03,07`), padded as written."""
    out = []
    for item in body.split(","):
        m = _RANGE.match(item.strip())
        if m is None:
            raise ValueError(f"host list {text!r}: {item!r} is not a number or a range")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo):
            raise ValueError(f"host list {text!r}: range {item!r} runs backwards")
        width = len(lo) if lo.startswith("0") else 0
        out += [str(n).zfill(width) for n in range(int(lo), int(hi) + 1)]
    return out


def _expand_name(name: str, text: str) -> list[str]:
    pieces: list[list[str]] = []
    for literal, body in re.findall(r"([^\[\]]*)(?:\[([^\]]*)\])?", name):
        if literal:
            pieces.append([literal])
        if body:
            pieces.append(_numbers(body, text))
    return ["".join(p) for p in itertools.product(*pieces)]


def expand_hostlist(text: str) -> list[str]:
    """Every host name of a SLURM host list, in order."""
    text = text.strip()
    if not text:
        raise ValueError("empty host list")
    hosts = []
    for name in _split_top(text):
        if not name or name.startswith("["):
            raise ValueError(f"host list {text!r}: an empty host name")
        hosts += _expand_name(name, text)
    return hosts


__all__ = ["expand_hostlist"]
