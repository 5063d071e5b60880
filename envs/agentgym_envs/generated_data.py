"""The data files a `make_*` module generates for its env: written the one way (a split file lists
one row per line, so a regeneration diffs line by line) behind the one command line
(`--out DIR`, `--seed N`)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping
from pathlib import Path


def split_json(rows: list[dict[str, str]]) -> str:
    """A task split: a JSON list with one `{"item_id", "category"}` row per line."""
    return "[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n"


def write_files(out: Path, files: Mapping[str, str]) -> None:
    """Write each `name -> text` into `out` (created when missing)."""
    out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")


def run_main(
    prog: str, default_out: Path, default_seed: int, write: Callable[[Path, int], dict[str, int]]
) -> None:
    """The command line of a `make_*` module: `write(out, seed)`, then each file's row count."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--out", type=Path, default=default_out)
    parser.add_argument("--seed", type=int, default=default_seed)
    args = parser.parse_args()
    for name, n in write(args.out, args.seed).items():
        print(f"{name}: {n} rows")
