#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl init-model --out runs/models/miniwob-click-2m --env miniwob --split click_train --transcripts 1200 --turn-cap 2 --system-prompt 'You act on a web page. Reply with one command in triple backticks, e.g. ```click [id]```: click [id], hover [id], type [id] [text] [1|0], scroll [down|up], go_back or stop [answer].' --vocab-size 1000 --hidden 192 --layers 4 --heads 3 --kv-heads 3 --intermediate 576 --warmup-steps 700 --warmup-batch 8 --warmup-observation-weight 1.0 --threads 2
agentgym-rl env serve miniwob --port 26387 --zmq-port 29214 &
agentgym-rl env serve miniwob --port 11403 --zmq-port 16847 &
agentgym-rl learn --config runs/miniwob_click/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/miniwob_click/configs/rollout-0.yaml &
