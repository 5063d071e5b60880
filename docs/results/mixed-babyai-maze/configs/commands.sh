#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl init-model --out runs/models/mixed-babyai-maze-2m --turn-cap 3 --mix '{"env":"babyai","split":"goto_train","system_prompt":"You are in a BabyAI grid world. Reply with a line '"'"'Thought: <your goal>'"'"', then one line '"'"'Action: <action>'"'"', an available action.","env_options":["observation=compact"],"transcripts":2000}' --mix '{"env":"maze","split":"train","system_prompt":"You are in a maze. Reply with one line '"'"'Action: move <direction>'"'"', an open direction that brings you closer to the goal.","transcripts":1000}' --hidden 192 --layers 4 --heads 3 --kv-heads 3 --intermediate 576 --warmup-steps 1000 --warmup-batch 8 --warmup-observation-weight 1.0 --thought-line Goal: --threads 2
agentgym-rl env serve babyai --port 27729 --zmq-port 30884 --env-option observation=compact &
agentgym-rl env serve babyai --port 12631 --zmq-port 16548 --env-option observation=compact &
agentgym-rl env serve maze --port 26171 --zmq-port 17481 &
agentgym-rl learn --config runs/mixed_babyai_maze/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/mixed_babyai_maze/configs/rollout-0.yaml &
