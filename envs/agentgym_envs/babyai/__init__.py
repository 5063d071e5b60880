"""BabyAI on minigrid: text observations, BFS-planned high-level actions, task splits in data/."""
