#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve textcraft --port 16395 --zmq-port 26282 --env-option observation=state --env-option distractors=1 &
agentgym-rl env serve textcraft --port 15002 --zmq-port 22227 --env-option observation=state --env-option distractors=1 &
agentgym-rl learn --config runs/textcraft_shallow/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/textcraft_shallow/configs/rollout-0.yaml &
