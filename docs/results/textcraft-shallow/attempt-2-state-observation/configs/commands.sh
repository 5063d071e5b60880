#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl init-model --out runs/models/textcraft-shallow-2m --env textcraft --split shallow_train --transcripts 2000 --turn-cap 4 --system-prompt 'You craft Minecraft items. Reply with a line '"'"'Thought: <your goal>'"'"', then one line '"'"'Action: <action>'"'"': get N item, craft N item using N a, N b (a listed recipe) or inventory.' --env-option observation=state --env-option distractors=3 --hidden 192 --layers 4 --heads 3 --kv-heads 3 --intermediate 576 --warmup-steps 700 --warmup-batch 8 --warmup-observation-weight 1.0 --thought-line Goal: --threads 2
agentgym-rl env serve textcraft --port 15015 --zmq-port 16336 --env-option observation=state --env-option distractors=3 &
agentgym-rl env serve textcraft --port 26769 --zmq-port 30264 --env-option observation=state --env-option distractors=3 &
agentgym-rl learn --config runs/textcraft_shallow/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/textcraft_shallow/configs/rollout-0.yaml &
