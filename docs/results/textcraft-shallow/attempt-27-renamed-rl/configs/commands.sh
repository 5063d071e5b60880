#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve textcraft --port 28245 --zmq-port 29808 --env-option observation=state --env-option distractors=1 --env-option redraw=true --env-option scaled=true --env-option menu=names --env-option admissible=true --env-option rename=true &
agentgym-rl env serve textcraft --port 26867 --zmq-port 18596 --env-option observation=state --env-option distractors=1 --env-option redraw=true --env-option scaled=true --env-option menu=names --env-option admissible=true --env-option rename=true &
agentgym-rl learn --config runs/textcraft_renamed_att27/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/textcraft_renamed_att27/configs/rollout-0.yaml &
