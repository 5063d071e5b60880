#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve textcraft --port 31533 --zmq-port 18246 --env-option observation=state --env-option distractors=1 --env-option redraw=true &
agentgym-rl env serve textcraft --port 28540 --zmq-port 19392 --env-option observation=state --env-option distractors=1 --env-option redraw=true &
agentgym-rl learn --config runs/textcraft_shallow_att15/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/textcraft_shallow_att15/configs/rollout-0.yaml &
