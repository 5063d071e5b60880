"""`agentgym-rl train`: plan a run (compose and check every per-process config), start its
children, follow it with a progress bar, stop it in order. See docs/train.md."""

from __future__ import annotations

from agentgym_rl.processes.child import ChildSpec
from agentgym_rl.supervise.children import RunPlan, write_plan
from agentgym_rl.supervise.plan import PlanError, plan_run

__all__ = ["ChildSpec", "PlanError", "RunPlan", "plan_run", "write_plan"]
