"""The rollout server's weight receiver: the gate before generation, and the evaluation's hold."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest
import torch

from agentgym_rl.weights.publisher import WeightPublisher
from agentgym_rl.weights.receiver import WeightReceiver
from waiting import await_until


class Engine:
    """Records the updates it is given; its version is the last one applied."""

    def __init__(self) -> None:
        self.version = 0
        self.updates: list[int] = []

    async def update_weights(self, version: int, tensors: dict[str, Any]) -> float:
        self.updates.append(version)
        self.version = version
        return 0.0


def test_no_endpoint_no_receiver_and_an_engine_that_cannot_update_is_refused() -> None:
    async def main() -> None:
        hold = asyncio.Lock()
        assert WeightReceiver.start(None, Engine(), hold=hold) is None
        with pytest.raises(TypeError, match="has no update_weights"):
            WeightReceiver.start("tcp://127.0.0.1:1", object(), hold=hold)  # type: ignore[arg-type]

    asyncio.run(main())


def test_a_server_joining_mid_run_is_current_only_after_the_update_and_the_hold(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="agentgym_rl.weights.receiver")
    publisher = WeightPublisher("tcp://127.0.0.1:0", chunk_bytes=4096)
    publisher.publish(1, {"w": torch.ones(8)}, timeout_s=1)  # the learner is at version 1
    engine, pumping = Engine(), threading.Event()

    def pump() -> None:  # the learner's side: registrations and the catch-up update
        while not pumping.is_set():
            publisher.serve(0.05)

    async def until(pred: Any, what: str, deadline_s: float = 20.0) -> None:
        async def holds() -> bool:
            return bool(pred())

        await await_until(holds, deadline_s, what, poll_s=0.01)

    async def main() -> None:
        hold = asyncio.Lock()
        await hold.acquire()  # an evaluation holds the weights
        receiver = WeightReceiver.start(publisher.endpoint, engine, hold=hold)
        assert receiver is not None
        learner = asyncio.create_task(asyncio.to_thread(pump))
        gate = asyncio.create_task(receiver.until_current())
        try:
            waits = "version 1 waits for the held-out evaluation"
            await until(lambda: waits in caplog.text, "the update never reached the hold")
            assert not gate.done() and engine.updates == []
            hold.release()
            await asyncio.wait_for(gate, 20)
            assert engine.updates == [1] and engine.version == 1
            assert receiver.applied_versions == [1]
            assert "joined the run at version 1" in caplog.text
        finally:
            pumping.set()
            await learner
            await receiver.stop()

    try:
        asyncio.run(main())
    finally:
        publisher.close()
