#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve babyai --port 25364 --zmq-port 15428 --env-option observation=compact &
agentgym-rl env serve babyai --port 14258 --zmq-port 21730 --env-option observation=compact &
agentgym-rl learn --config runs/studies/scalinginter/scaling_inter-s2/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/studies/scalinginter/scaling_inter-s2/configs/rollout-0.yaml &
