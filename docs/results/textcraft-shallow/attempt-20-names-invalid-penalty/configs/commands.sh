#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve textcraft --port 29651 --zmq-port 23185 --env-option observation=state --env-option distractors=1 --env-option redraw=true --env-option scaled=true --env-option menu=names &
agentgym-rl env serve textcraft --port 28862 --zmq-port 24735 --env-option observation=state --env-option distractors=1 --env-option redraw=true --env-option scaled=true --env-option menu=names &
agentgym-rl learn --config runs/textcraft_names/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/textcraft_names/configs/rollout-0.yaml &
