#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve babyai --port 21295 --zmq-port 18851 --env-option observation=compact &
agentgym-rl env serve babyai --port 29949 --zmq-port 13019 --env-option observation=compact &
agentgym-rl learn --config runs/studies/scalinginter/fixed_short-s0/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/studies/scalinginter/fixed_short-s0/configs/rollout-0.yaml &
