#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve babyai --port 14314 --zmq-port 20010 --env-option observation=compact &
agentgym-rl env serve babyai --port 29971 --zmq-port 11372 --env-option observation=compact &
agentgym-rl learn --config runs/studies/scalinginter/scaling_inter-s1/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/studies/scalinginter/scaling_inter-s1/configs/rollout-0.yaml &
