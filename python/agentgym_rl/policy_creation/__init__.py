"""Locally created models: nothing is downloaded from a hub, every checkpoint is built here."""

from agentgym_rl.policy_creation.factory import CHATML_TEMPLATE, SPECIAL_TOKENS, create_tiny_model

__all__ = ["CHATML_TEMPLATE", "SPECIAL_TOKENS", "create_tiny_model"]
