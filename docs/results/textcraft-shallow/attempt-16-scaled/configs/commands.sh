#!/bin/sh
# The processes of this run in start order (agentgym-rl train runs them).
agentgym-rl init-model --out runs/models/textcraft-scaled-2m --transcripts 4000 --turn-cap 4 --mix '{"env":"textcraft","split":"shallow_train","system_prompt":"You craft Minecraft items. Reply with one line '"'"'Action: <action>'"'"': get N item, craft N item using N a, N b (a listed recipe) or inventory.","env_options":["observation=state","distractors=1","scaled=true"]}' --mix '{"env":"textcraft","split":"shallow_train","system_prompt":"You craft Minecraft items. Reply with one line '"'"'Action: <action>'"'"': get N item, craft N item using N a, N b (a listed recipe) or inventory.","env_options":["observation=state","distractors=10","scaled=true"]}' --hidden 192 --layers 4 --heads 3 --kv-heads 3 --intermediate 576 --warmup-steps 1500 --warmup-batch 8 --warmup-observation-weight 1.0 --threads 2
agentgym-rl env serve textcraft --port 21112 --zmq-port 21164 --env-option observation=state --env-option distractors=1 --env-option redraw=true --env-option scaled=true &
agentgym-rl env serve textcraft --port 13456 --zmq-port 32046 --env-option observation=state --env-option distractors=1 --env-option redraw=true --env-option scaled=true &
agentgym-rl learn --config runs/textcraft_scaled_att16/configs/learn.yaml &
agentgym-rl serve-rollouts --config runs/textcraft_scaled_att16/configs/rollout-0.yaml &
