#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve babyai --port 29349 --zmq-port 31371 --env-option observation=compact &
agentgym-rl env serve babyai --port 11907 --zmq-port 22840 --env-option observation=compact &
agentgym-rl learn --config runs/studies/scalinginter/fixed_short-s1/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/studies/scalinginter/fixed_short-s1/configs/rollout-0.yaml &
