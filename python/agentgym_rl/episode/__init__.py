"""The episode layer: what runs one episode, shared by training and evaluation.

- `types`: the `Engine` contract, `Generation`, `EpisodePlan`, `TurnBudget`, `EnvSpec`.
- `dataset`: task splits and the resumable `TaskSource` cursor.
- `prompts`: system prompts and first user messages per env.
- `actions`: reading the action out of one turn, per env format.
- `turn`: the turn rule (`act`, `play_turn`, `EpisodeState`, `episode_reward`).
- `agent`: `AgentLoop`, one episode as one coroutine on an engine and an env pool.
- `metrics`: `RolloutMetrics`, the counters the agent loop and the dispatcher feed.
- `log`: the episode log (`episodes.jsonl`) written during runs and read by `show`.
- `scoring`: Avg@n / Pass@n per env and category.

It imports only `_core`, `config`, `trajectory` and `wire` (tests/test_layering.py): the
rollout server, evaluation, `model` and the commands import it, never the reverse. The
episode status is `wire.types.Status`, the one Python mirror of the Rust enum.
"""
