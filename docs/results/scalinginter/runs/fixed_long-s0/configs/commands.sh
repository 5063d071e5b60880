#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve babyai --port 26074 --zmq-port 32681 --env-option observation=compact &
agentgym-rl env serve babyai --port 16340 --zmq-port 12759 --env-option observation=compact &
agentgym-rl learn --config runs/studies/scalinginter/fixed_long-s0/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/studies/scalinginter/fixed_long-s0/configs/rollout-0.yaml &
