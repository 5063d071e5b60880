#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve textcraft --port 26097 --zmq-port 15998 --env-option observation=state --env-option distractors=3 &
agentgym-rl env serve textcraft --port 19422 --zmq-port 16189 --env-option observation=state --env-option distractors=3 &
agentgym-rl learn --config runs/textcraft_shallow/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/textcraft_shallow/configs/rollout-0.yaml &
