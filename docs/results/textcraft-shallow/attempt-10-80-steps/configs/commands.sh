#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve textcraft --port 24147 --zmq-port 28795 --env-option observation=state --env-option distractors=1 &
agentgym-rl env serve textcraft --port 15022 --zmq-port 25618 --env-option observation=state --env-option distractors=1 &
agentgym-rl learn --config runs/textcraft_shallow/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/textcraft_shallow/configs/rollout-0.yaml &
