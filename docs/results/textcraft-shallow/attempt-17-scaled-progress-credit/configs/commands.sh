#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve textcraft --port 19911 --zmq-port 31146 --env-option observation=state --env-option distractors=1 --env-option redraw=true --env-option scaled=true --env-option progress_credit=0.2 &
agentgym-rl env serve textcraft --port 10691 --zmq-port 29654 --env-option observation=state --env-option distractors=1 --env-option redraw=true --env-option scaled=true --env-option progress_credit=0.2 &
agentgym-rl learn --config runs/textcraft_scaled_att17/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/textcraft_scaled_att17/configs/rollout-0.yaml &
