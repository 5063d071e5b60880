"""The rollout side: dispatcher, turn schedule, curriculum, sync loop, learner stream and the
assembly of the `serve-rollouts` process (its inference engine is `inference/`)."""
