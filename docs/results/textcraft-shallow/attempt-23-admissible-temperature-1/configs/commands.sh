#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve textcraft --port 22458 --zmq-port 22704 --env-option observation=state --env-option distractors=1 --env-option redraw=true --env-option scaled=true --env-option menu=names --env-option admissible=true &
agentgym-rl env serve textcraft --port 32261 --zmq-port 20018 --env-option observation=state --env-option distractors=1 --env-option redraw=true --env-option scaled=true --env-option menu=names --env-option admissible=true &
agentgym-rl learn --config runs/textcraft_admissible_t1/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/textcraft_admissible_t1/configs/rollout-0.yaml &
