#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl init-model --out runs/models/textcraft-menu-2m --transcripts 4000 --turn-cap 4 --mix '{"env":"textcraft","split":"shallow_train","system_prompt":"You craft Minecraft items. Reply with one line '"'"'Action: N'"'"', N the number of a listed action.","env_options":["observation=state","distractors=1","redraw=true","scaled=true","menu=numbers"]}' --mix '{"env":"textcraft","split":"shallow_train","system_prompt":"You craft Minecraft items. Reply with one line '"'"'Action: N'"'"', N the number of a listed action.","env_options":["observation=state","distractors=10","redraw=true","scaled=true","menu=numbers"]}' --hidden 192 --layers 4 --heads 3 --kv-heads 3 --intermediate 576 --warmup-steps 1000 --warmup-batch 8 --warmup-observation-weight 1.0 --threads 2
agentgym-rl env serve textcraft --port 18165 --zmq-port 24764 --env-option observation=state --env-option distractors=1 --env-option redraw=true --env-option scaled=true --env-option menu=numbers &
agentgym-rl env serve textcraft --port 15585 --zmq-port 17098 --env-option observation=state --env-option distractors=1 --env-option redraw=true --env-option scaled=true --env-option menu=numbers &
agentgym-rl learn --config runs/textcraft_menu/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/textcraft_menu/configs/rollout-0.yaml &
