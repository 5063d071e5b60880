"""Group codec throughput: Rust (through the binding) and pure Python (msgpack + numpy).

Realistic groups (8 samples x 8k tokens, and 8 x 512). Prints GB/s of message bytes for encode
and decode; the target is >= 1 GB/s each way for the Rust codec. The Rust-only figures without
Python overhead come from ``cargo bench -p agentgym-wire --bench codec``.

    python benches/bench_codec.py [--quick]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from agentgym_rl import _core
from agentgym_rl.wire import Status, WireGroup, WireSample, WireTokens, decode_group, encode_group
from figures import figure


def make_group(n_samples: int, n_tokens: int) -> WireGroup:
    rng = np.random.default_rng(0)
    samples = []
    for i in range(n_samples):
        mask = (np.arange(n_tokens) % 3 == 0).astype(np.uint8)
        tokens = WireTokens(
            input_ids=rng.integers(0, 151_936, n_tokens, dtype=np.uint32),
            loss_mask=mask,
            logprobs=(-rng.random(n_tokens, dtype=np.float32)) * mask,
            versions=np.full(n_tokens, i, dtype=np.uint32),
            turn_spans=np.array([[0, n_tokens // 2], [n_tokens // 2, n_tokens]], dtype=np.uint32),
        )
        samples.append(WireSample(tokens, 1.0, Status.DONE, False, 2, 8, 1, 5))
    return WireGroup(1, "babyai_1", "babyai", samples)


def rate(fn: Callable[[], object], nbytes: int, seconds: float) -> float:
    fn()
    n, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        fn()
        n += 1
    return n * nbytes / elapsed / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="short run for CI")
    args = ap.parse_args()
    seconds = 0.3 if args.quick else 3.0
    print(f"{'case':<14} {'codec':<28} {'encode GB/s':>12} {'decode GB/s':>12}")
    worst = float("inf")
    for n_samples, n_tokens in [(8, 8192), (8, 512)]:
        g = make_group(n_samples, n_tokens)
        data = encode_group(g)
        as_dict = g.to_dict()
        carrier = _core.decode_group(data)
        size = len(data)
        case = f"{n_samples}x{n_tokens}"
        rows = [
            (
                "rust (dict, numpy out)",
                lambda d=as_dict: _core.encode_group(d),
                lambda b=data: _core.decode_group_dict(b),
            ),
            (
                "rust (Group carrier)",
                lambda c=carrier: _core.encode_group(c),
                lambda b=data: _core.decode_group(b),
            ),
            (
                "python (msgpack+frombuffer)",
                lambda g=g: encode_group(g),
                lambda b=data: decode_group(b),
            ),
        ]
        for name, enc, dec in rows:
            e, d = rate(enc, size, seconds), rate(dec, size, seconds)
            if name.startswith("rust (dict") and n_tokens >= 8192:
                worst = min(worst, e, d)
            print(f"{case:<14} {name:<28} {e:>12.2f} {d:>12.2f}")
        print(f"{case:<14} message size {size / 1e6:.2f} MB")
    print(f"rust codec, realistic size, slower direction: {worst:.2f} GB/s (target >= 1.0)")
    figure("codec", "encode/decode, slower direction", worst, "GB/s", target=">= 1 GB/s")


if __name__ == "__main__":
    main()
