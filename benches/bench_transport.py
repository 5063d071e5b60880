"""Transport throughput over tcp loopback: the Rust group stream vs raw pyzmq PUSH/PULL.

Both move the same encoded groups (8 samples x 8k tokens by default) from a sending thread to a
receiving thread of this process. Prints groups/s, MB/s and the ratio Rust/raw (target >= 0.7).
The Rust stream adds credit, acks and de-duplication; raw PUSH/PULL has none of these.

    python benches/bench_transport.py [--quick] [--tokens 8192] [--window 16]
"""

from __future__ import annotations

import argparse
import socket
import threading
import time

import zmq

from agentgym_rl._core import GroupReceiver, GroupSender, encode_group
from bench_codec import make_group  # type: ignore[import-not-found]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bench_rust(payload: bytes, n: int, window: int) -> float:
    with GroupReceiver("tcp://127.0.0.1:0", window=window) as rx:
        with GroupSender(rx.endpoint, "bench") as tx:
            tx.wait_connected(30)

            def produce() -> None:
                for _ in range(n):
                    tx.send(payload, 60)

            start = time.perf_counter()
            t = threading.Thread(target=produce)
            t.start()
            for _ in range(n):
                if rx.recv(60) is None:
                    raise RuntimeError("rust stream stalled")
            elapsed = time.perf_counter() - start
            t.join()
            tx.flush(30)
    return elapsed


def bench_pyzmq(payload: bytes, n: int) -> float:
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    push = ctx.socket(zmq.PUSH)
    port = free_port()
    pull.bind(f"tcp://127.0.0.1:{port}")
    push.connect(f"tcp://127.0.0.1:{port}")
    push.send(b"warm-up")
    pull.recv()

    def produce() -> None:
        for _ in range(n):
            push.send(payload, copy=False)

    start = time.perf_counter()
    t = threading.Thread(target=produce)
    t.start()
    for _ in range(n):
        pull.recv(copy=True)  # bytes out, like the Rust receiver
    elapsed = time.perf_counter() - start
    t.join()
    push.close(0)
    pull.close(0)
    ctx.term()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="short run for CI")
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--window", type=int, default=16)
    args = ap.parse_args()
    payload = encode_group(make_group(8, args.tokens).to_dict())
    mb = len(payload) / 1e6
    n = 200 if args.quick else 2000
    rounds = 1 if args.quick else 3
    bench_rust(payload, 20, args.window)  # warm-up (runtime start, connections)
    best_rust = min(bench_rust(payload, n, args.window) for _ in range(rounds))
    best_raw = min(bench_pyzmq(payload, n) for _ in range(rounds))
    print(f"payload {mb:.2f} MB x {n} groups, best of {rounds}")
    print(f"{'transport':<26} {'groups/s':>10} {'MB/s':>10}")
    for name, secs in [("rust GroupSender/Receiver", best_rust), ("raw pyzmq PUSH/PULL", best_raw)]:
        print(f"{name:<26} {n / secs:>10.1f} {n * mb / secs:>10.1f}")
    print(f"ratio rust/raw pyzmq: {best_raw / best_rust:.2f} (target >= 0.70)")


if __name__ == "__main__":
    main()
