"""Published figures agree with their records (`scripts/record_figures.py`): every figure the
README and docs link to a record, and every bench table rendered from one; a planted mismatch of
either kind is caught."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.unit


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "record_figures", ROOT / "scripts/record_figures.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rf = _checker()


def test_the_docs_agree_with_their_records() -> None:
    found, checked = [], 0
    for doc in rf.documents():
        more, n = rf.problems(doc)
        found += more
        checked += n
    assert not found, "\n".join(found)
    assert checked >= 5  # the README's and the write-ups' linked figures at least


def test_a_figure_shown_is_the_value_rounded_as_shown() -> None:
    assert rf.agrees("0.780", 0.78) and rf.agrees("**0.78**", 0.7799)
    assert not rf.agrees("0.780", 0.7806) and not rf.agrees("0.78", 0.786)
    assert rf.agrees("4.41x", 4.4149) and rf.agrees("1,315 tokens/s", 1315.2)
    assert rf.agrees("64%", 0.6412) and not rf.agrees("64%", 0.66)
    assert not rf.agrees("n/a", 0.5) and not rf.agrees("0.5", "0.5")
    assert rf.agrees("2.9e-06", 2.861e-06) and not rf.agrees("2.9e-06", 2.7e-06)
    assert rf.agrees("3e-6", 2.861e-06) and not rf.agrees("2.9e-05", 2.861e-06)


def test_a_planted_mismatch_is_caught(tmp_path: Path) -> None:
    record = {"eval": {"v20": {"all": {"success": 0.78}}}, "rates": [0.5, 0.25]}
    (tmp_path / "rec.json").write_text(json.dumps(record))
    doc = tmp_path / "page.md"
    doc.write_text(
        'At v20 [**0.780**](rec.json "/eval/v20/all/success"), the second rate '
        '[0.25](rec.json "/rates/1").\n'
    )
    assert rf.problems(doc) == ([], 2)
    doc.write_text(
        'At v20 [**0.790**](rec.json "/eval/v20/all/success"), then [0.3](rec.json "/rates/9").\n'
    )
    found, _ = rf.problems(doc)
    assert len(found) == 2
    assert "shows **0.790**, the record says 0.78" in found[0]
    assert "/rates/9" in found[1] and "IndexError" in found[1]


def test_a_bench_table_is_rendered_from_its_record_and_a_changed_one_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rf, "ROOT", tmp_path)
    record = {
        "date": "2026-12-02T20:00:00+0000",
        "commit": "0123456789abcdef",
        "tree_changed": False,
        "machine": {"cpu_cores": 2, "memory_gb": 23.4, "load_average_at_start": [0.5, 0.4, 0.3]},
        "settings": {"benches": ["rollout"], "quick": False, "argv": ["run.py"]},
        "benches": {"rollout": {"exit": 0, "seconds": 600.0}},
        "figures": [
            {
                "bench": "rollout",
                "name": "episodes at 40 ms env latency",
                "value": 39.5,
                "unit": "episodes/s",
                "baseline": 8.96,
                "baseline_name": "synchronous loop",
                "target": ">= 4x sync",
            }
        ],
    }
    records = tmp_path / "docs" / "results" / "benches"
    records.mkdir(parents=True)
    path = records / "r.json"
    path.write_text(json.dumps(record))
    doc = tmp_path / "docs" / "performance.md"
    doc.write_text(
        "# Performance\n\n<!-- bench-table: x -->\nold\n<!-- /bench-table -->\n\nAfter.\n"
    )
    rf.update(doc, path)
    text = doc.read_text()
    assert "<!-- bench-table: docs/results/benches/r.json -->\nRecord " in text
    assert (
        "| rollout | episodes at 40 ms env latency | 39.5 episodes/s | 8.96 (synchronous loop) |"
        in text
    )
    assert "4.41x" in text and "10.0 minutes" in text and "commit 0123456" in text
    assert text.endswith("<!-- /bench-table -->\n\nAfter.\n")
    assert rf.problems(doc) == ([], 1)
    record["figures"][0]["value"] = 41.0  # the record says otherwise now
    path.write_text(json.dumps(record))
    found, _ = rf.problems(doc)
    assert found == [f"{doc}: bench table differs from docs/results/benches/r.json (run `render`)"]
    shutil.rmtree(records)
    assert "missing record" in rf.problems(doc)[0][0]


def test_the_readme_s_latest_run_is_the_newest_record(tmp_path: Path) -> None:
    """The README's "latest recorded run" (its table row, the yardsticks beside it) quotes the
    last line of the main runs' record, and the record script appends a finished run as the new
    last line."""
    import re

    record = ROOT / "docs/results/babyai-goto/main-runs.json"
    runs = json.loads(record.read_text())
    lines = (ROOT / "README.md").read_text().splitlines()
    (row,) = [x for x in lines if x.startswith("| the latest recorded run")]
    (sticks,) = [x for x in lines if x.startswith("Against its yardsticks")]
    in_row = {int(i) for i in re.findall(r'main-runs\.json "/(\d+)/', row)}
    yardsticks = re.findall(r'main-runs\.json "/(\d+)/(chance|rule)"', sticks)
    assert len(yardsticks) == 2 and in_row == {int(i) for i, _ in yardsticks} == {len(runs) - 1}
    copy = tmp_path / "main-runs.json"
    shutil.copy(record, copy)
    spec = importlib.util.spec_from_file_location("main_run", ROOT / "scripts/main_run_record.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    source = f"{ROOT / 'docs/results/babyai-goto/runs.json'}#."
    argv = ["--from-record", source, "--how", "again", "--out", str(copy), "--commit", "abc1234"]
    assert script.main(argv) == 0
    grown = json.loads(copy.read_text())
    assert grown[:-1] == runs and grown[-1]["how"] == "again" and grown[-1]["commit"] == "abc1234"
    assert grown[-1]["success"]["60"] == runs[0]["success"]["60"]
    assert len(copy.read_text().splitlines()) == len(grown) + 2  # one run a line
