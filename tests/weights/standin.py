"""A stand-in rollout server for weight-stream tests and benchmarks: the real subscriber, no engine.

`python tests/weights/standin.py --endpoint tcp://127.0.0.1:5557 --id s0` runs a
`WeightSubscriber` (ZeroMQ, chunks, checksums, relaying: the same code a rollout server runs)
that applies each update to a plain torch module holding tensors of the update's names and
shapes (created at the first update, and again when they change), in place of a vLLM engine. It prints one JSON line per
ack: `{"id", "version", "ok", "reason", "digest", "rejections", "forwarded_bytes",
"apply_s"}` (`digest`: blake2b-128 of the module's tensors in name order after the update), and
`{"id", "ready": relay_endpoint}` once its sockets are up. It exits on SIGTERM.

`--corrupt-forward N` flips one byte of the N-th chunk it relays (tests: the next hop must
reject it). Eight vLLM engines do not fit on a 2-core box; these processes stand in for them.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import signal
import sys
from collections.abc import Sequence
from typing import Any

import torch

from agentgym_rl.auth import read_secret
from agentgym_rl.weights.subscriber import WeightSubscriber


class StandInModule(torch.nn.Module):
    """Parameters named after the update's tensors (dots become `__`), updated in place."""

    def __init__(self, tensors: dict[str, torch.Tensor]) -> None:
        super().__init__()
        for name, t in tensors.items():
            param = torch.nn.Parameter(torch.zeros(t.shape, dtype=t.dtype), requires_grad=False)
            self.register_parameter(name.replace(".", "__"), param)

    def fits(self, tensors: dict[str, torch.Tensor]) -> bool:
        params = dict(self.named_parameters())
        return len(params) == len(tensors) and all(
            (p := params.get(n.replace(".", "__"))) is not None
            and p.shape == t.shape
            and p.dtype == t.dtype
            for n, t in tensors.items()
        )

    @torch.no_grad()
    def load(self, tensors: dict[str, torch.Tensor]) -> None:
        params = dict(self.named_parameters())
        for name, t in tensors.items():
            params[name.replace(".", "__")].copy_(t)

    def digest(self) -> str:
        h = hashlib.blake2b(digest_size=16)
        for name, p in sorted(self.named_parameters()):
            h.update(name.encode())
            h.update(p.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        return h.hexdigest()


class _CorruptingSubscriber(WeightSubscriber):
    """Flips a byte of the `corrupt`-th chunk it relays (after verifying it itself): of its
    first data frame, or with `corrupt_frame=1` of its (signed) header."""

    corrupt: int = -1
    corrupt_frame: int = 2

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        forward = self.fanout.forward
        count = [0]

        def corrupting(frames: Sequence[Any]) -> None:
            i = self.corrupt_frame
            if count[0] == self.corrupt and len(frames) > 2:
                raw = bytearray(frames[i].bytes if hasattr(frames[i], "bytes") else frames[i])
                raw[-1] ^= 0x01
                frames = [*frames[:i], bytes(raw), *frames[i + 1 :]]
            count[0] += 1
            forward(frames)

        self.fanout.forward = corrupting  # type: ignore[method-assign]


async def run(args: argparse.Namespace) -> None:
    sub = _CorruptingSubscriber(
        args.endpoint,
        server_id=args.id,
        relay=args.relay,
        chunk_timeout_s=args.chunk_timeout_s,
        secret=read_secret(None),  # AGENTGYM_RL_SECRET, as `train` hands it to its servers
    )
    sub.corrupt = args.corrupt_forward
    sub.corrupt_frame = 1 if args.corrupt_header else 2
    module: StandInModule | None = None
    last: dict[str, Any] = {}

    def load(tensors: dict[str, torch.Tensor]) -> str:
        nonlocal module
        if module is None or not module.fits(tensors):
            module = StandInModule(tensors)  # the first update, or another model
        module.load(tensors)
        return module.digest()

    async def apply(version: int, tensors: dict[str, torch.Tensor]) -> None:
        # in a thread, as a vLLM engine works in its own processes: the loop keeps relaying
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        digest = await asyncio.to_thread(load, tensors)
        last.update(digest=digest, apply_s=loop.time() - t0)

    ack = sub._ack

    async def reporting_ack(version: int, ok: bool, reason: str, seconds: float) -> None:
        await ack(version, ok, reason, seconds)
        line = {
            "id": sub.server_id,
            "version": version,
            "ok": ok,
            "reason": reason,
            "digest": last.get("digest") if ok else None,
            "apply_s": last.get("apply_s") if ok else None,
            "rejections": dict(sub.rejections),
            "forwarded_bytes": sub.fanout.bytes_forwarded,
        }
        print(json.dumps(line), flush=True)

    sub._ack = reporting_ack  # type: ignore[method-assign]
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print(json.dumps({"id": sub.server_id, "ready": sub.relay_endpoint}), flush=True)
    try:
        await sub.serve(apply, stop)
    finally:
        sub.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoint", required=True, help="the learner's WeightPublisher")
    ap.add_argument("--id", required=True, help="server id")
    ap.add_argument("--relay", default="auto", help="relay bind host ('none': no relay)")
    ap.add_argument("--chunk-timeout-s", type=float, default=10.0)
    ap.add_argument("--corrupt-forward", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument("--corrupt-header", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.relay == "none":
        args.relay = None
    torch.set_num_threads(1)
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
