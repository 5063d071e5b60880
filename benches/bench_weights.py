"""Weight updates over loopback: the learner's star (old) vs the relay tree, 1-8 receivers.

The learner side is the real `WeightPublisher` in this process. The receivers are STAND-INS:
separate processes (`tests/weights/standin.py`) running the real
`WeightSubscriber` (ZeroMQ, chunks, crc32 per chunk, whole-update digest, relaying), which apply
each update to a plain torch module of the same shapes instead of a vLLM engine (eight engines
do not fit on 2 cores). Models: random weights in Qwen2 shapes built in memory with
transformers (no download): "2M" (the project's tiny Qwen2 shapes at hidden 192, 4 layers,
fp32) and "100M" (hidden 768, 12 layers, vocab 32000, bf16).

For each receiver count, model and topology: one warm-up update (allocations), then the
fastest of `--repeats` updates: update seconds (publish until every receiver acked), the
learner's bytes sent, the tree's roots and depth (hops to the deepest receiver). Star is
`fanout >= receivers` (every receiver fed by the learner); tree is fanout 2; "tree, signed" is
the tree with every message signed under a run secret (HMAC-SHA256, verified at every hop), as
`train` runs it. All receivers must ack with identical digests, or the bench fails.

    python benches/bench_weights.py [--quick] [--receivers 1 2 4 8] [--models 2M 100M]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch

from agentgym_rl.auth import ENV_VAR
from agentgym_rl.processes.child import die_with_parent
from agentgym_rl.weights import schema
from agentgym_rl.weights.publisher import PublishResult, WeightPublisher
from figures import figure

# the stand-in rollout server the weight-stream tests use too
STANDIN = Path(__file__).resolve().parents[1] / "tests" / "weights" / "standin.py"

MODELS: dict[str, dict[str, Any]] = {
    "2M": {
        "vocab_size": 600,
        "hidden_size": 192,
        "num_hidden_layers": 4,
        "num_attention_heads": 3,
        "num_key_value_heads": 3,
        "intermediate_size": 576,
        "dtype": torch.float32,
    },
    "100M": {
        "vocab_size": 32000,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "intermediate_size": 2048,
        "dtype": torch.bfloat16,
    },
}
TREE_FANOUT = 2
SECRET = b"bench-weights-secret-0123456789ab"
TOPOLOGIES = (("star (old)", False), ("tree", False), ("tree, signed", True))


def qwen2_weights(name: str, seed: int) -> dict[str, torch.Tensor]:
    """HF-named random weights in the shapes of a Qwen2 model (tied embeddings)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    spec = dict(MODELS[name])
    dtype = spec.pop("dtype")
    config = Qwen2Config(**spec, tie_word_embeddings=True)
    with torch.device("meta"):
        model = Qwen2ForCausalLM(config)
    g = torch.Generator().manual_seed(seed)
    return {n: torch.randn(p.shape, generator=g).to(dtype) for n, p in model.named_parameters()}


class StandIns:
    """`n` stand-in receiver processes; their ack lines are collected by threads."""

    def __init__(self, endpoint: str, n: int, secret: bytes | None = None) -> None:
        self.procs = []
        self.acks: queue.Queue[dict[str, Any]] = queue.Queue()
        env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
        if secret is not None:
            env[ENV_VAR] = secret.decode()  # as `train` hands the secret to its servers
        for i in range(n):
            cmd = [sys.executable, str(STANDIN)]
            proc = subprocess.Popen(
                [*cmd, "--endpoint", endpoint, "--id", f"r{i}"],
                stdout=subprocess.PIPE,
                text=True,
                env=env,
                preexec_fn=die_with_parent,
            )
            threading.Thread(target=self._read, args=(proc,), daemon=True).start()
            self.procs.append(proc)

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            record = json.loads(line)
            if "version" in record:
                self.acks.put(record)

    def digests(self, version: int, n: int, timeout_s: float = 60) -> set[str]:
        found: dict[str, str] = {}
        deadline = time.monotonic() + timeout_s
        while len(found) < n:
            record = self.acks.get(timeout=max(0.1, deadline - time.monotonic()))
            if record["version"] == version and record["ok"]:
                found[record["id"]] = record["digest"]
        return set(found.values())

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(5)


def measure(
    pub: WeightPublisher, procs: StandIns, n: int, weights: dict[str, torch.Tensor], repeats: int
) -> PublishResult:
    best: PublishResult | None = None
    for attempt in range(1 + repeats):  # the first: warm-up (receivers allocate)
        version = pub.version + 1
        res = pub.publish(version, weights, timeout_s=300)
        if not res.ok or len(res.acked) != n:
            raise RuntimeError(f"version {version}: {res}")
        if len(procs.digests(version, n)) != 1:
            raise RuntimeError(f"version {version}: receivers hold different weights")
        if attempt and (best is None or res.seconds < best.seconds):
            best = res
    assert best is not None
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2M model, 1 and 4 receivers")
    ap.add_argument("--receivers", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    if args.quick:
        args.receivers, args.models, args.repeats = [1, 4], ["2M"], 1
    torch.set_num_threads(1)
    weights = {m: qwen2_weights(m, seed=0) for m in args.models}
    print(
        "receivers are stand-ins: processes running the real WeightSubscriber (ZeroMQ, chunks, "
        "checksums, relaying) that apply to a plain torch module, not vLLM engines"
    )
    chunk_mb = schema.DEFAULT_CHUNK_BYTES >> 20
    print(f"loopback, {os.cpu_count()} cores, chunks of {chunk_mb} MB, tree fanout {TREE_FANOUT}")
    header = f"{'model':<6} {'params':>7} {'dtype':<9} {'receivers':>9} {'topology':<12} "
    print(header + f"{'update_s':>9} {'learner_MB':>11} {'roots':>5} {'depth':>5}")
    rows: dict[tuple[str, int, str], PublishResult] = {}
    for n in args.receivers:
        for signed in (False, True):
            pub = WeightPublisher("tcp://127.0.0.1:0", secret=SECRET if signed else None)
            procs = StandIns(pub.endpoint, n, SECRET if signed else None)
            try:
                if pub.wait_for_servers(n, timeout_s=120) != n:
                    raise RuntimeError(f"only {len(pub.servers)} of {n} receivers registered")
                for model in args.models:
                    for topology, with_secret in TOPOLOGIES:
                        if with_secret == signed:
                            pub.fanout = max(n, 1) if topology.startswith("star") else TREE_FANOUT
                            res = measure(pub, procs, n, weights[model], args.repeats)
                            rows[(model, n, topology)] = res
                            print_row(model, weights[model], n, topology, res)
            finally:
                procs.close()
                pub.close()
    n = max(args.receivers)
    for model in args.models:
        star, tree = rows[(model, n, "star (old)")], rows[(model, n, "tree")]
        signed_tree = rows[(model, n, "tree, signed")]
        print(
            f"tree/star ({model}, {n} receivers): {tree.bytes_sent / star.bytes_sent:.2f}x "
            f"learner bytes, {tree.seconds / star.seconds:.2f}x update time"
        )
        figure(
            "weights", f"update, {model} to {n} receivers in a tree", tree.seconds, "s",
            baseline=star.seconds, baseline_name="star", lower_is_better=True,
        )  # fmt: skip
        print(
            f"signed/unsigned tree ({model}, {n} receivers): "
            f"{signed_tree.seconds / tree.seconds:.2f}x update time"
        )


def print_row(
    model: str, w: dict[str, torch.Tensor], n: int, topology: str, res: PublishResult
) -> None:
    params = sum(t.numel() for t in w.values())
    dtype = str(next(iter(w.values())).dtype).removeprefix("torch.")
    print(
        f"{model:<6} {params / 1e6:>6.1f}M {dtype:<9} {n:>9} {topology:<12} "
        f"{res.seconds:>9.3f} {res.bytes_sent / 1e6:>11.1f} {len(res.roots):>5} {res.depth:>5}",
        flush=True,
    )


if __name__ == "__main__":
    main()
