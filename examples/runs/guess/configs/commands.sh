#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl init-model --out runs/models/guess-2m --env guess --transcripts 1000 --turn-cap 4 --system-prompt 'Find the secret number from 1 to 10. Reply with one line '"'"'Action: <number>'"'"'.' --hidden 192 --layers 4 --heads 3 --kv-heads 3 --intermediate 576 --warmup-steps 300 --warmup-batch 8 --threads 2
agentgym-rl env serve guess_env:GuessEnvironment --port 13360 --zmq-port 22998 &
agentgym-rl learn --config runs/guess/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/guess/configs/rollout-0.yaml &
