#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve babyai --port 28571 --zmq-port 30637 --env-option observation=compact &
agentgym-rl env serve babyai --port 15862 --zmq-port 32359 --env-option observation=compact &
agentgym-rl learn --config runs/studies/scalinginter/scaling_inter-s0/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/studies/scalinginter/scaling_inter-s0/configs/rollout-0.yaml &
