#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl init-model --out runs/models/babyai-goto-8m --env babyai --split goto_train --transcripts 2000 --turn-cap 3 --system-prompt 'You are in a BabyAI grid world. Reply with a line '"'"'Thought: <your goal>'"'"', then one line '"'"'Action: <action>'"'"', an available action.' --env-option observation=compact --hidden 384 --layers 4 --heads 6 --kv-heads 6 --intermediate 1152 --warmup-steps 700 --warmup-batch 8 --warmup-observation-weight 1.0 --thought-line Goal: --threads 2
agentgym-rl env serve babyai --port 27467 --zmq-port 20493 --env-option observation=compact &
agentgym-rl env serve babyai --port 28167 --zmq-port 20188 --env-option observation=compact &
agentgym-rl learn --config runs/studies/scalinginter/large_fixed_short-s0/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/studies/scalinginter/large_fixed_short-s0/configs/rollout-0.yaml &
