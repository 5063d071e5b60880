#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve babyai --port 25165 --zmq-port 17759 --env-option observation=compact &
agentgym-rl env serve babyai --port 19525 --zmq-port 20824 --env-option observation=compact &
agentgym-rl learn --config runs/studies/scalinginter/fixed_short-s2/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/studies/scalinginter/fixed_short-s2/configs/rollout-0.yaml &
