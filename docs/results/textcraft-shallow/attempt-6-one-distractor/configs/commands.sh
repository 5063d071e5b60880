#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve textcraft --port 21390 --zmq-port 24959 --env-option observation=state --env-option distractors=1 &
agentgym-rl env serve textcraft --port 25902 --zmq-port 28030 --env-option observation=state --env-option distractors=1 &
agentgym-rl learn --config runs/textcraft_shallow/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/textcraft_shallow/configs/rollout-0.yaml &
