#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve textcraft --port 28213 --zmq-port 21826 --env-option observation=state --env-option distractors=1 --env-option progress_credit=0.2 &
agentgym-rl env serve textcraft --port 18267 --zmq-port 26458 --env-option observation=state --env-option distractors=1 --env-option progress_credit=0.2 &
agentgym-rl learn --config runs/textcraft_shallow_att12/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/textcraft_shallow_att12/configs/rollout-0.yaml &
