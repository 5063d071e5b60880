"""Where the processes of a run go: the hosts of each role, and how servers bind.

Contract: `LOCAL` is one machine (every process on 127.0.0.1, servers bound to loopback), what
`train` plans. A cluster launcher builds a `Placement` from the nodes its scheduler gave each
role (`Placement.spread`): env servers go round-robin over the env hosts in plan order, rollout
servers fill the rollout hosts evenly in order (server `i` on host `i // per_node`, device
`i % per_node` when the nodes have GPUs), the learner's ranks spread evenly over its hosts (the
first runs global rank 0, which binds the group and weight sockets). Servers then bind every
interface and are reached at their host's name.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Placement:
    """The hosts of each role (names or addresses other nodes can reach)."""

    env_hosts: tuple[str, ...] = ("127.0.0.1",)
    rollout_hosts: tuple[str, ...] = ("127.0.0.1",)
    learner_hosts: tuple[str, ...] = ("127.0.0.1",)
    rollout_servers: int = 1
    """Rollout servers to spread over `rollout_hosts`."""
    rollout_gpus_per_node: int = 0
    """GPUs of a rollout host (0: none, no device is assigned)."""
    bind_all: bool = False
    """Servers bind every interface (a cluster) rather than loopback (one machine)."""
    addresses: dict[str, str] = field(default_factory=dict)
    """Host -> the address others reach it at, where that is not its name (SLURM's NodeAddr)."""

    @classmethod
    def spread(
        cls,
        env_hosts: list[str],
        rollout_hosts: list[str],
        learner_hosts: list[str],
        *,
        rollout_servers: int,
        rollout_gpus_per_node: int = 0,
        addresses: dict[str, str] | None = None,
    ) -> Placement:
        if not (env_hosts and rollout_hosts and learner_hosts):
            raise ValueError("every role needs at least one host")
        return cls(
            tuple(env_hosts),
            tuple(rollout_hosts),
            tuple(learner_hosts),
            rollout_servers,
            rollout_gpus_per_node,
            bind_all=True,
            addresses=dict(addresses or {}),
        )

    @property
    def bind_host(self) -> str:
        return "0.0.0.0" if self.bind_all else "127.0.0.1"

    def reach(self, host: str) -> str:
        """The address `host` is reached at."""
        return self.addresses.get(host, host)

    @property
    def learner_host(self) -> str:
        """The host of the learner's global rank 0."""
        return self.learner_hosts[0]

    def env_host(self, index: int) -> str:
        """The host of the `index`-th env server process (plan order)."""
        return self.env_hosts[index % len(self.env_hosts)]

    def _per_node(self) -> int:
        return -(-self.rollout_servers // len(self.rollout_hosts))

    def rollout_host(self, index: int) -> str:
        return self.rollout_hosts[min(index // self._per_node(), len(self.rollout_hosts) - 1)]

    def rollout_device(self, index: int) -> str | None:
        """CUDA_VISIBLE_DEVICES of rollout server `index` (None: leave the node's setting)."""
        if self.rollout_gpus_per_node == 0:
            return None
        return str(index % self._per_node())


LOCAL = Placement()
"""One machine: what `agentgym-rl train` runs."""

__all__ = ["LOCAL", "Placement"]
