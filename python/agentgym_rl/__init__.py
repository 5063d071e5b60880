"""agentgym-rl: multi-turn agentic RL with an asynchronous rollout engine and a Rust core.

The data flow and where each part lives: docs/architecture.md.
"""

from agentgym_rl._core import (
    AgentGymError,
    Group,
    Sample,
    Ticket,
    TrajectoryBuffer,
    __version__,
)

__all__ = ["AgentGymError", "Group", "Sample", "Ticket", "TrajectoryBuffer", "__version__"]
