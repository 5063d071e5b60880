"""Published figures tied to their records: bench tables rendered from a bench record, and figures
in the docs linked to the record value they quote, both checked.

    python scripts/record_figures.py render RECORD [--doc docs/performance.md]
    python scripts/record_figures.py check [FILE ...]      # default: README.md and docs/**/*.md

Two conventions, both plain Markdown:
- A bench table: the lines between `<!-- bench-table: PATH -->` and `<!-- /bench-table -->` are
  the rendering of the bench record at PATH (`benches/records.py`), written by `render`.
- A figure: a link whose target is a JSON record and whose title is a JSON pointer into it,
  e.g. `[**0.780**](results/smollm2-goto/seed1.json "/goto_test_greedy_cap5/v20/all/success")`.
  The number shown must be the record's value at the pointer, rounded as shown (a `%` shows a
  fraction as a percentage; commas, `**` and a trailing `x` are read through; `2.9e-06` is
  rounded to its mantissa's digits).
`check` reports every block and figure that disagrees with its record (exit 1), or says how
many it checked.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benches"))

from figures import Figure, table  # noqa: E402  (benches/ is not a package)

BLOCK = re.compile(r"<!-- bench-table: (?P<path>\S+) -->\n(?P<body>.*?)<!-- /bench-table -->", re.S)
FIGURE = re.compile(r"\[(?P<shown>[^\]\n]+)\]\((?P<path>[^)\s]+\.json) \"(?P<pointer>/[^\"]*)\"\)")
NUMBER = re.compile(r"-?[\d,]*\.?\d+(?:e[-+]?\d+)?")


def render(record: dict[str, Any], path: str) -> str:
    """A bench record as the lines of its block: what it ran on, then every figure."""
    machine, settings = record["machine"], record["settings"]
    minutes = sum(b.get("seconds", 0) for b in record["benches"].values()) / 60
    form = "quick forms" if settings["quick"] else "full form"
    load = ", ".join(f"{x:g}" for x in machine["load_average_at_start"])
    changed = " (with uncommitted changes)" if record.get("tree_changed") else ""
    head = (
        f"Record `{path}`: {len(record['benches'])} benches, {form}, {minutes:.1f} minutes, "
        f"{record['date'][:10]}, commit {record['commit'][:7]}{changed}; {machine['cpu_cores']} "
        f"CPU cores, {machine['memory_gb']} GB, load average {load} at the start."
    )
    figures = [Figure(**f) for f in record["figures"]]
    return f"{head}\n\n{table(figures)}\n"


def update(doc: Path, record_path: Path) -> None:
    """Replace the doc's block for `record_path` (or, where none names it, its only block) with
    its rendering; a second record's table gets its own block, added by hand where it belongs."""
    rel = record_path.resolve().relative_to(ROOT).as_posix()
    text = doc.read_text()
    blocks = list(BLOCK.finditer(text))
    named = [b for b in blocks if b["path"] == rel]
    if len(named) != 1 and len(blocks) != 1:
        raise SystemExit(
            f"{doc}: no <!-- bench-table: {rel} --> block, and {len(blocks)} others: add its "
            f"markers where its table belongs"
        )
    block = named[0] if len(named) == 1 else blocks[0]
    body = render(json.loads(record_path.read_text()), rel)
    new = f"<!-- bench-table: {rel} -->\n{body}<!-- /bench-table -->"
    doc.write_text(text[: block.start()] + new + text[block.end() :])


def pointed(record: Any, pointer: str) -> Any:
    """The value at a JSON pointer (RFC 6901)."""
    for part in pointer.lstrip("/").split("/") if pointer != "/" else []:
        key = part.replace("~1", "/").replace("~0", "~")
        record = record[int(key)] if isinstance(record, list) else record[key]
    return record


def agrees(shown: str, value: Any) -> bool:
    """Whether the number shown is `value` rounded as shown."""
    match = NUMBER.search(shown.replace("**", ""))
    if match is None or not isinstance(value, int | float):
        return False
    text = match.group().replace(",", "")
    if "%" in shown[match.end() : match.end() + 2]:
        value = 100 * value
    mantissa, _, exponent = text.partition("e")  # 2.861e-06: rounded to its mantissa's digits
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    half_step = 0.5 * 10 ** (int(exponent or 0) - decimals)
    return abs(float(text) - value) <= half_step * (1 + 1e-6)  # a float's own error read through


def problems(doc: Path) -> tuple[list[str], int]:
    """What in `doc` disagrees with its records, and how many blocks and figures it holds."""
    text, found, checked = doc.read_text(), [], 0
    for block in BLOCK.finditer(text):
        checked += 1
        path = ROOT / block["path"]
        if not path.is_file():
            found.append(f"{doc}: bench table of a missing record {block['path']}")
        elif block["body"] != render(json.loads(path.read_text()), block["path"]):
            found.append(f"{doc}: bench table differs from {block['path']} (run `render`)")
    for fig in FIGURE.finditer(text):
        checked += 1
        path = (doc.parent / fig["path"]).resolve()
        where = f"{doc}:{text.count(chr(10), 0, fig.start()) + 1}"
        try:
            value = pointed(json.loads(path.read_text()), fig["pointer"])
        except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
            found.append(f"{where}: {fig['shown']} -> {fig['path']}{fig['pointer']}: {e!r}")
            continue
        if not agrees(fig["shown"], value):
            found.append(f"{where}: shows {fig['shown']}, the record says {value}")
    return found, checked


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("render", help="write a bench record's table into a doc's block")
    r.add_argument("record", type=Path)
    r.add_argument("--doc", type=Path, default=ROOT / "docs" / "performance.md")
    c = sub.add_parser("check", help="every block and linked figure against its record")
    c.add_argument("files", type=Path, nargs="*")
    args = parser.parse_args(argv)
    if args.command == "render":
        update(args.doc, args.record)
        print(f"rendered {args.record} into {args.doc}")
        return 0
    found, checked = [], 0
    for doc in args.files or documents():
        more, n = problems(doc)
        found += more
        checked += n
    print("\n".join(found) if found else f"{checked} figures and tables agree with their records")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
