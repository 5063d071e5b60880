#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl init-model --out runs/models/babyai-study-2m --env babyai --split study_train --transcripts 2000 --turn-cap 3 --system-prompt 'You are in a BabyAI grid world. Reply with a line '"'"'Thought: <your goal>'"'"', then one line '"'"'Action: <action>'"'"', an available action.' --env-option observation=compact --hidden 192 --layers 4 --heads 3 --kv-heads 3 --intermediate 576 --warmup-steps 700 --warmup-batch 8 --warmup-observation-weight 1.0 --thought-line Goal: --threads 2
agentgym-rl env serve babyai --port 19928 --zmq-port 17968 --env-option observation=compact &
agentgym-rl env serve babyai --port 18736 --zmq-port 19736 --env-option observation=compact &
agentgym-rl learn --config runs/studies/scalinginter/fixed_long-s0/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/studies/scalinginter/fixed_long-s0/configs/rollout-0.yaml &
