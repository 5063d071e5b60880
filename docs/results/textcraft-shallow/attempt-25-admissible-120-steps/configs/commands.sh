#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve textcraft --port 25981 --zmq-port 32597 --env-option observation=state --env-option distractors=1 --env-option redraw=true --env-option scaled=true --env-option menu=names --env-option admissible=true &
agentgym-rl env serve textcraft --port 14082 --zmq-port 30641 --env-option observation=state --env-option distractors=1 --env-option redraw=true --env-option scaled=true --env-option menu=names --env-option admissible=true &
agentgym-rl learn --config runs/textcraft_admissible/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/textcraft_admissible/configs/rollout-0.yaml &
