"""What a learner talks to, as the trainer sees it: the groups coming in, the weights going out
and the ledger of every group's fate. `learner/service.py` plugs in the real ones (`wire`'s
`GroupReceiver`, `weights`' `WeightPublisher`, `wire.ledger`'s `GroupLedger`) on rank 0; tests
plug in stand-ins. Other ranks get none: rank 0 broadcasts what it received."""

from __future__ import annotations

from typing import Any, Protocol


class GroupInbox(Protocol):
    """Where finished groups arrive (`GroupReceiver`)."""

    def recv(self, timeout_s: float) -> tuple[Any, bytes] | None:
        """The next (sender, payload), or None after `timeout_s`."""
        ...

    def close(self) -> None: ...


class WeightOutbox(Protocol):
    """Where new weights go (`WeightPublisher`)."""

    def publish(self, version: int, named_tensors: Any, timeout_s: float) -> Any:
        """Send `named_tensors` as `version`; returns the publication's report."""
        ...

    def announce(self, version: int) -> None:
        """Tell joining rollout servers the version they may start from."""
        ...

    def serve(self, budget_s: float) -> bool:
        """Answer registrations and relay traffic for up to `budget_s`; True while busy."""
        ...

    def close(self) -> None: ...


class Ledger(Protocol):
    """Where each group's fate is written (`GroupLedger`)."""

    def write(self, record: dict[str, Any]) -> None: ...

    def close(self, *, clean: bool = True) -> None: ...
