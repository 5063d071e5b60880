#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve textcraft --port 12685 --zmq-port 11019 --env-option observation=state --env-option distractors=3 &
agentgym-rl env serve textcraft --port 18399 --zmq-port 14714 --env-option observation=state --env-option distractors=3 &
agentgym-rl learn --config runs/textcraft_shallow/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/textcraft_shallow/configs/rollout-0.yaml &
