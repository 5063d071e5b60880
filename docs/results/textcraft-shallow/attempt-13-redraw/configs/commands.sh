#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve textcraft --port 23998 --zmq-port 30942 --env-option observation=state --env-option distractors=1 --env-option redraw=true &
agentgym-rl env serve textcraft --port 29795 --zmq-port 14330 --env-option observation=state --env-option distractors=1 --env-option redraw=true &
agentgym-rl learn --config runs/textcraft_shallow_att13/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/textcraft_shallow_att13/configs/rollout-0.yaml &
