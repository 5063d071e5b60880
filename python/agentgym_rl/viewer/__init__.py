"""Episodes as people read them: `transcript` renders one logged episode with its trained tokens
marked and, joined by request id, the advantage the learner trained each turn with
(`agentgym-rl show` prints it; the run viewer lays out the same blocks); `episode_index`,
`page_data`, `app` and `page/` are the run viewer (`agentgym-rl view`)."""
