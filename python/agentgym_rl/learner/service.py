"""The learner process assembled: `run_learner(config)` is to `agentgym-rl learn` what
`rollout/service.py`'s `run_service` is to `serve-rollouts`.

Contract: rank 0 (torchrun's `RANK`, 0 without torchrun) opens the links (`learner/links.py`):
the group receiver bound at `receive.bind`, the weight publisher at `weights.endpoint` when set,
the group ledger in `log_dir`; every rank builds its `Trainer` with them, resumes from the newest
complete checkpoint when asked (writing `resumed_from` to the ledger), and trains until
`max_steps`, SIGTERM/SIGINT, or `receive.idle_timeout_s` without a usable group (checkpointed
first: `IdleTimeout`). Whatever happens, the links and the process group are closed.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from contextlib import ExitStack

from agentgym_rl.config.learn import LearnConfig
from agentgym_rl.learner.checkpoint import resume_latest
from agentgym_rl.learner.links import GroupInbox, Ledger, WeightOutbox
from agentgym_rl.learner.trainer import Trainer
from agentgym_rl.processes.orphans import die_if_orphaned

log = logging.getLogger("learn")


def run_learner(config: LearnConfig, *, resume: bool, secret: bytes | None) -> None:
    """Train this rank until done or stopped (see the module contract); raises `IdleTimeout`."""
    # Until the trainer is built, SIGINT ends this rank at once, as SIGTERM does: a Python
    # handler runs only between bytecodes, and a rank blocked in a collective of the build
    # (its peer already stopped) never got there (torchrun then waited 30 s to SIGKILL it)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    stop = threading.Event()

    def on_signal(*_: object) -> None:
        die_if_orphaned()  # no supervisor left to wait for the step in hand
        stop.set()

    with ExitStack() as links:
        receiver, publisher, ledger = (
            _open_links(config, secret, links) if _is_rank0() else (None, None, None)
        )
        trainer = Trainer(config, receiver=receiver, publisher=publisher, ledger=ledger)
        links.callback(trainer.close)
        if resume:
            found = resume_latest(trainer, config.checkpoint.dir)
            log.info("resumed from %s", found or "nothing (fresh start)")
            if ledger is not None:
                ledger.write({"resumed_from": trainer.step})
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        trainer.run(stop)


def _is_rank0() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def _open_links(
    config: LearnConfig, secret: bytes | None, links: ExitStack
) -> tuple[GroupInbox, WeightOutbox | None, Ledger]:
    """Rank 0's receiver, publisher (when weights are published) and ledger, each closed by
    `links` (in reverse order, after the trainer)."""
    from agentgym_rl.wire import GroupReceiver
    from agentgym_rl.wire.ledger import GroupLedger

    ledger = GroupLedger(config.log_dir)
    links.callback(ledger.close)
    receiver = GroupReceiver(config.receive.bind, window=config.receive.window, secret=secret)
    links.callback(receiver.close)
    publisher = None
    if config.weights is not None:
        from agentgym_rl.weights.publisher import WeightPublisher

        w = config.weights
        publisher = WeightPublisher(
            w.endpoint, fanout=w.fanout, relay_stall_s=w.relay_stall_s, secret=secret
        )
        links.callback(publisher.close)
    return receiver, publisher, ledger
