#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve textcraft --port 30841 --zmq-port 10631 --env-option observation=state --env-option distractors=1 --env-option redraw=true &
agentgym-rl env serve textcraft --port 29822 --zmq-port 21895 --env-option observation=state --env-option distractors=1 --env-option redraw=true &
agentgym-rl learn --config runs/textcraft_shallow_att14/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/textcraft_shallow_att14/configs/rollout-0.yaml &
