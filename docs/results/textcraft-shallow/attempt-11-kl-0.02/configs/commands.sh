#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve textcraft --port 11706 --zmq-port 17581 --env-option observation=state --env-option distractors=1 &
agentgym-rl env serve textcraft --port 32142 --zmq-port 26178 --env-option observation=state --env-option distractors=1 &
agentgym-rl learn --config runs/textcraft_shallow_att11/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/textcraft_shallow_att11/configs/rollout-0.yaml &
