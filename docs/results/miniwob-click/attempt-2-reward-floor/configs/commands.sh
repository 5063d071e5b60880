#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl env serve miniwob --port 26768 --zmq-port 23365 &
agentgym-rl env serve miniwob --port 27263 --zmq-port 31424 &
agentgym-rl learn --config runs/miniwob_click/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/miniwob_click/configs/rollout-0.yaml &
