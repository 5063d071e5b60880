"""The rollout side: engine, agent loop, dispatcher and the `serve-rollouts` process."""
