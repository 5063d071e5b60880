#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve babyai --port 14379 --zmq-port 13110 --env-option observation=compact &
agentgym-rl env serve babyai --port 30428 --zmq-port 13672 --env-option observation=compact &
agentgym-rl learn --config runs/studies/scalinginter/fixed_long-s1/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/studies/scalinginter/fixed_long-s1/configs/rollout-0.yaml &
