"""Episodes as people read them: `transcript` renders one logged episode with its trained tokens
marked and, joined by request id, the advantage the learner trained each turn with
(`agentgym-rl show`)."""
