"""The env-server framework: one `Environment` served over HTTP and ZeroMQ from one process."""

from agentgym_envs.server.base import EnvError, Environment, Episode, ErrorCode, StepResult

__all__ = ["EnvError", "Environment", "Episode", "ErrorCode", "StepResult"]
