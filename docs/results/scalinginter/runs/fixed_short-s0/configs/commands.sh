#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve babyai --port 27293 --zmq-port 25279 --env-option observation=compact &
agentgym-rl env serve babyai --port 10792 --zmq-port 11624 --env-option observation=compact &
agentgym-rl learn --config runs/studies/scalinginter/fixed_short-s0/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/studies/scalinginter/fixed_short-s0/configs/rollout-0.yaml &
