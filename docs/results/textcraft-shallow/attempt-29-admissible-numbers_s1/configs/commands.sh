#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve textcraft --port 13937 --zmq-port 32267 --env-option observation=state --env-option distractors=1 --env-option redraw=true --env-option scaled=true --env-option menu=numbers --env-option admissible=true &
agentgym-rl env serve textcraft --port 19366 --zmq-port 27877 --env-option observation=state --env-option distractors=1 --env-option redraw=true --env-option scaled=true --env-option menu=numbers --env-option admissible=true &
agentgym-rl learn --config runs/textcraft_numbers_s1/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/textcraft_numbers_s1/configs/rollout-0.yaml &
