"""The OpenAI-compatible endpoint that serves a user's own agent from the policy being trained
(`app.py`) and keeps its calls token-in/token-out as episodes (`episodes.py`)."""
