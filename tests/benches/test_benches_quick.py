"""Every Python bench runs: `python benches/run.py --only NAME --quick` in a real subprocess exits 0
and prints its figures with the ratio against its baseline. A bench that drifts from the code it
measures (a renamed argument, a changed signature) fails here, not the next time someone runs it.

Quick forms measured on 2 cores: builder ~10 s, codec ~4 s, transport ~1 s, envpool ~13 s,
learner ~15 s, weights ~22 s, games ~2 s, tools ~6 s, gateway ~4 s, padding ~20 s, rollout ~70 s,
context ~60 s and ceiling ~40 s
(each its own vLLM engine: the bench is a separate process, so the test session's shared engine
cannot serve it).
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "benches" / "run.py"


def _runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_run", RUNNER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCHES: dict[str, str] = _runner().BENCHES

pytestmark = [pytest.mark.engine, pytest.mark.slow]

NUMBER = r"[\d,]+(\.\d+)?"
# The line(s) each bench must print: its figures side by side with its baseline, and the ratio.
FIGURES = {
    "builder": [rf"^\s*\d+\s+\d+\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}x$"],
    "codec": [
        rf"^8x8192\s+rust \(Group carrier\)\s+{NUMBER}\s+{NUMBER}$",
        rf"^8x8192\s+python \(msgpack\+frombuffer\)\s+{NUMBER}\s+{NUMBER}$",
        rf"^rust codec, realistic size, slower direction: {NUMBER} GB/s",
    ],
    "transport": [
        rf"^ratio rust/raw pyzmq: {NUMBER} ",
        rf"^ratio signed/unsigned: {NUMBER}$",
        rf"^signing per learner step \(16 groups\): {NUMBER} ms on the stream, {NUMBER}% ",
    ],
    "envpool": [
        rf"^\s+\(a\) Rust pool, ZeroMQ\s+{NUMBER} steps/s\s+\(\s*{NUMBER}x c\)$",
        rf"^\s+\(c\) AgentGym-style requests \+ threads\s+{NUMBER} steps/s",
        rf"^\s+Starlette \(the env server\)\s+p50 +{NUMBER} ms\s+p99 +{NUMBER} ms\s+{NUMBER}x$",
        rf"^env server on Starlette, p50 over bare ASGI: worst {NUMBER}x \(target <= 1.10\)$",
    ],
    "learner": [rf"^ratio megatron / transformers: {NUMBER}x$"],
    "rollout": [
        rf"^async, 16 in flight: 8 groups \(8 received\), 32 episodes in {NUMBER}s: .* tokens/s, .* "
        rf"success {NUMBER}, engine idle {NUMBER}%",
        rf"^ sync: 8 groups \(8 received\), 32 episodes in {NUMBER}s: .* tokens/s, .* "
        rf"success {NUMBER}, engine idle {NUMBER}%",
        rf"^async/sync: {NUMBER}x episodes/s, {NUMBER}x tokens/s",
        rf"^\| 40 ms \| {NUMBER} / {NUMBER} \(\*\*{NUMBER}x\*\*\)",
    ],
    "ceiling": [
        rf"^\| same engine, every turn at once \| \d+ \| {NUMBER} \| {NUMBER} \| 1\.00 \| all \|  \|$",
        rf"^\| rollout server, 8 groups in flight \| \d+ \| {NUMBER} \| {NUMBER} \| {NUMBER} \| "
        rf"{NUMBER} on average \| {NUMBER} on average \|$",
    ],
    "sciworld": [
        rf"^ratio \(a\)/\(b\): create\+reset {NUMBER}x faster, steps/s {NUMBER}x$",
        # the verdict is the bench's to print, not the test's to require: 40 quick episodes
        # are too few to call a JVM's heap flat (a loaded CI machine read +25%)
        rf"^memory end vs after episode 1: [+-]{NUMBER}% \((NOT )?flat\)",
    ],
    "retrieval": [
        rf"^bm25\s+5340\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}$",
        rf"^dense\s+\d+\s+{NUMBER}",
    ],
    "web": [
        rf"^web N=1: {NUMBER} steps/s, {NUMBER} MB/episode rss, {NUMBER} MB/episode pss$",
        rf"^web N=32: {NUMBER} steps/s, {NUMBER} MB/episode rss, {NUMBER} MB/episode pss$",
    ],
    "games": [
        rf"^wordle: {NUMBER} steps/s in process, {NUMBER} us/step \({NUMBER}x the noop loop",
        rf"^maze: {NUMBER} steps/s in process, {NUMBER} us/step \({NUMBER}x the noop loop",
    ],
    "tools": [
        rf"^babyai: tools {NUMBER} tok/turn vs react {NUMBER} tok/turn \({NUMBER}x\); parse "
        rf"{NUMBER} us vs {NUMBER} us \({NUMBER}x\); schemas \+\d+ tok$",
        rf"^searchqa: tools {NUMBER} tok/turn vs tags {NUMBER} tok/turn \({NUMBER}x\)",
    ],
    "gateway": [
        rf"^\s+direct\s+{NUMBER} calls/s\s+{NUMBER} ms/call$",
        rf"^gateway: {NUMBER} ms/call over the engine's 20 ms \({NUMBER}x the direct loop's",
        rf"^\s+FastAPI \+ pydantic\s+p50 +{NUMBER} ms\s+p99 +{NUMBER} ms\s+{NUMBER}x$",
        rf"^Starlette p50 over bare ASGI: worst {NUMBER}x \(target <= 1.10\)$",
    ],
    "weights": [
        r"^receivers are stand-ins: processes running the real WeightSubscriber",
        rf"^2M\s+{NUMBER}M\s+float32\s+4\s+tree\s+{NUMBER}\s+{NUMBER}\s+2\s+2$",
        rf"^tree/star \(2M, 4 receivers\): 0\.50x learner bytes, {NUMBER}x update time$",
        rf"^2M\s+{NUMBER}M\s+float32\s+4\s+tree, signed\s+{NUMBER}\s+{NUMBER}\s+2\s+2$",
        rf"^signed/unsigned tree \(2M, 4 receivers\): {NUMBER}x update time$",
    ],
    "context": [
        rf"^maze\s+full\s+{NUMBER}\s+{NUMBER}\s+\d+\s+{NUMBER}\s+{NUMBER}",
        rf"^maze k=4: longest sample {NUMBER}x below full history, engine prompt "
        rf"tokens/episode {NUMBER}x below",
    ],
    "padding": [
        rf"^\| fewest micro-batches \| \d+ \| \d+ \| {NUMBER} \| {NUMBER} \| 1\.00x \|$",
        rf"^\| overhead 256 tokens \| \d+ \| \d+ \| {NUMBER} \| {NUMBER} \| {NUMBER}x \|$",
        r"^fit: ",
        rf"^\| fewest micro-batches \| {NUMBER} \| {NUMBER} \|$",  # the main run's real lengths
    ],
    "lora": [
        rf"^\| main \| full \| {NUMBER}M \| {NUMBER} MB \| {NUMBER} MB \| {NUMBER} GB \| {NUMBER} \|$",
        rf"^\| main \| LoRA r16 \| {NUMBER}M \| {NUMBER} MB \| {NUMBER} MB \| {NUMBER} GB \| {NUMBER} \|$",
        rf"^main: LoRA r16 / full: update {NUMBER}%, optimizer state {NUMBER}%, peak RSS "
        rf"{NUMBER}x, tokens/s {NUMBER}x$",
    ],
    "viewer": [
        rf"^\| first page, fresh viewer \| {NUMBER} \|$",
        rf"^\| first page of a 1% filter \(held-out\), fresh viewer \| {NUMBER} \|$",
        rf"^\| index every line's scalars \(baseline\) \| {NUMBER} \|$",
    ],
    "judge": [
        rf"^env: 6 groups, 24 episodes in {NUMBER}s: {NUMBER} episodes/s",
        rf"^env\+judge, episode: 6 groups, 24 episodes .* judge calls 24, {NUMBER} prompt",
        rf"^env\+judge, group: 6 groups, 24 episodes .* judge calls 6, {NUMBER} prompt",
        rf"^\| env\+judge, group \| {NUMBER} \| {NUMBER}x \| {NUMBER} \| \d+% \| \d+ \|$",
    ],
    "model": [
        rf"^\| generated tokens/s, rollout server \| {NUMBER} \|$",
        rf"^\| async / sync \| {NUMBER} \|$",
        rf"^\| MB per weight update, LoRA r16 \| {NUMBER} \|$",
        rf"^\| step: weight update s \| {NUMBER} \|$",
        rf"^\| peak RSS GB, learner \| {NUMBER} \|$",
        rf"^\| peak RSS GB, rollout server \+ engine \| {NUMBER} \|$",
    ],
}
TIMEOUT_S = {"rollout": 600, "context": 600, "ceiling": 600}


def test_every_bench_is_registered_and_checked() -> None:
    """A bench script added to benches/ is runnable by `--only` and checked here."""
    scripts = {p.name for p in (ROOT / "benches").glob("bench_*.py")}
    assert set(BENCHES.values()) == scripts
    assert set(FIGURES) == set(BENCHES)
    unknown = subprocess.run(
        [sys.executable, str(RUNNER), "--only", "nope"], capture_output=True, text=True
    )
    assert unknown.returncode == 2 and "invalid choice: 'nope'" in unknown.stderr


# beyond CI's budget (`pytest -m extended`), each with a vLLM engine or a browser of its own, for
# code the rollout bench and the end-to-end runs also drive: context ~60 s, ceiling ~40 s, web
# ~39 s (Chromium), lora ~32 s, weights ~25 s, judge ~50 s (tests/judging drives its path) and
# model (the ceiling, rollout and lora benches' quick forms and a 2-step train)
EXTENDED = {"context", "ceiling", "web", "lora", "weights", "judge", "model"}


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=[pytest.mark.extended] if n in EXTENDED else []) for n in FIGURES],
)
def test_bench_quick_form_runs_and_prints_its_figures(name: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(RUNNER), "--only", name, "--quick", "--record-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S.get(name, 300),
        cwd=ROOT,
    )
    tail = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, tail
    assert f"=== {name}: {BENCHES[name]} ===" in proc.stdout
    for pattern in FIGURES[name]:
        assert re.search(pattern, proc.stdout, re.MULTILINE), f"{pattern!r} missing:\n{tail}"
    # its headline figures, in the runner's closing table
    assert "=== every figure (quick forms) ===" in proc.stdout
    assert re.search(rf"^\| {name} \| .+ \| {NUMBER} ", proc.stdout, re.MULTILINE), tail
    # and in the run's record, with what they were measured on
    [path] = tmp_path.glob("*-quick.json")
    assert f"record: {path}" in proc.stdout
    record = json.loads(path.read_text())
    assert record["settings"] == {
        "benches": [name],
        "quick": True,
        "argv": ["run.py", "--only", name, "--quick", "--record-dir", str(tmp_path)],
    }
    assert record["benches"][name]["exit"] == 0 and record["benches"][name]["seconds"] > 0
    assert (
        record["machine"]["cpu_cores"] >= 1 and len(record["machine"]["load_average_at_start"]) == 3
    )
    assert record["figures"] and {f["bench"] for f in record["figures"]} == {name}
    assert all(isinstance(f["value"], float) and f["unit"] is not None for f in record["figures"])
