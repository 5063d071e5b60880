#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve babyai --port 19514 --zmq-port 21920 --env-option observation=compact &
agentgym-rl env serve babyai --port 22131 --zmq-port 28752 --env-option observation=compact &
agentgym-rl learn --config runs/studies/scalinginter/fixed_long-s2/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/studies/scalinginter/fixed_long-s2/configs/rollout-0.yaml &
