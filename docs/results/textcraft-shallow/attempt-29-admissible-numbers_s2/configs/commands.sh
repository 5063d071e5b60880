#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve textcraft --port 14901 --zmq-port 16707 --env-option observation=state --env-option distractors=1 --env-option redraw=true --env-option scaled=true --env-option menu=numbers --env-option admissible=true &
agentgym-rl env serve textcraft --port 18829 --zmq-port 29836 --env-option observation=state --env-option distractors=1 --env-option redraw=true --env-option scaled=true --env-option menu=numbers --env-option admissible=true &
agentgym-rl learn --config runs/textcraft_numbers_s2/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/textcraft_numbers_s2/configs/rollout-0.yaml &
