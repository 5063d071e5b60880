"""SmolLM2-135M-Instruct through the stack: its chat template rendered by the Rust trajectory
builder token for token as transformers renders it, across turns and with its default system
turn; vLLM generating from those tokens with the log-probs the Megatron learner (Llama path,
tied embeddings, 9/3 GQA) computes for them, with full weights and with LoRA adapters, and
through the OpenAI endpoint."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
import torch

from agentgym_rl.inference.engine import EngineOptions, VllmEngine
from agentgym_rl.learner import convert, lora
from agentgym_rl.learner import model as lm
from agentgym_rl.learner.trainer import load_hf_state_dict
from agentgym_rl.trajectory import ChatTokenizer, TrajectoryBuilder
from lora_adapters import adapted

pytestmark = pytest.mark.engine
TEMPERATURE = 0.8
RANK, ALPHA = 4, 8.0
SYSTEM = {"role": "system", "content": "You are in a BabyAI grid world. Reply with an action."}
FIRST = {
    "role": "user",
    "content": "Goal: go to the red ball\nActions: turn left, go to red ball 1",
}
REPLY = {"role": "assistant", "content": "Thought: go to the red ball\nAction: go to red ball 1"}
SECOND = {"role": "user", "content": "You see a wall.\nActions: turn left, turn right"}


def conversations() -> list[list[dict[str, str]]]:
    return [
        [SYSTEM, FIRST],
        [SYSTEM, FIRST, REPLY, SECOND],
        [FIRST, REPLY, SECOND],  # no system turn: the template writes its own default one
    ]


def test_template_renders_token_exact_across_turns(smollm2: Path) -> None:
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(smollm2))
    chat = ChatTokenizer.from_dir(smollm2)
    for messages in conversations():
        for prompt in (False, True):
            want = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=prompt)
            assert chat.render(messages, add_generation_prompt=prompt) == want
            ids = hf(want, add_special_tokens=False)["input_ids"]
            assert chat.apply_chat_template(messages, add_generation_prompt=prompt).tolist() == ids
    # an episode built turn by turn (the reply's ids as an engine returns them) is the full render
    for prefix in ([SYSTEM, FIRST], [FIRST]):
        builder = TrajectoryBuilder(chat, prefix, stop_ids=[hf.convert_tokens_to_ids("<|im_end|>")])
        reply = hf(REPLY["content"] + "<|im_end|>", add_special_tokens=False)["input_ids"]
        assert builder.add_generated(reply, [0.0] * len(reply), 0)
        assert builder.add_observation(SECOND)
        # the observation's tokens end with the next turn's generation prompt
        full = hf.apply_chat_template(
            [*prefix, REPLY, SECOND], tokenize=False, add_generation_prompt=True
        )
        whole = hf(full, add_special_tokens=False)["input_ids"]
        trajectory = builder.finish()
        assert trajectory.input_ids.tolist() == whole and not trajectory.drift
        assert int(trajectory.loss_mask.sum()) == len(reply)


def test_engine_logprobs_are_the_learners(smollm2: Path) -> None:
    """Full weights, then LoRA adapters on every projection (q/k/v/o on 9/3 GQA, the MLP)
    merged by the engine into its weights: each version's log-probs are the learner's."""
    from transformers import AutoConfig

    chat = ChatTokenizer.from_dir(smollm2)
    prompt = chat.apply_chat_template([SYSTEM, FIRST], add_generation_prompt=True).tolist()
    opts = EngineOptions(
        max_model_len=512, max_num_seqs=4, dtype="float32", temperature=TEMPERATURE,
        max_lora_rank=RANK, lora_serving="merged",
    )  # fmt: skip
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()

    def run(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(300)

    engine = run(VllmEngine.start(smollm2, opts))
    lm.init_parallel(tp=1, seed=0)
    try:
        base = run(engine.generate(prompt, max_tokens=24, request_id="smol", seed=3))
        assert len(base.token_ids) >= 4
        hf = AutoConfig.from_pretrained(str(smollm2))
        model = lm.build_gpt_model(hf, fused_swiglu=False)
        spec = convert.ConvertSpec.from_hf(hf, 1, model.vocab_size)
        assert spec.tied and spec.num_heads == 9 and spec.num_kv_heads == 3
        convert.load_hf_weights(model, load_hf_state_dict(smollm2), spec)

        def learner(tokens: list[int]) -> torch.Tensor:
            ids = torch.tensor([prompt + tokens[:-1]])
            labels = torch.tensor([prompt[1:] + tokens])
            pos = torch.arange(ids.shape[1])[None]
            with torch.no_grad():
                out = lm.token_logprobs(
                    model, ids, pos, labels, TEMPERATURE, vocab_size=hf.vocab_size
                )
            return out[0, len(prompt) - 1 :]

        torch.testing.assert_close(
            torch.tensor(base.logprobs), learner(base.token_ids), atol=2e-3, rtol=0
        )
        update = adapted(model, spec, RANK, ALPHA, scale=0.05)
        assert any(".self_attn.k_proj." in n for n in update)  # the 3 KV heads' projection too
        run(engine.update_weights(1, update))
        moved = run(engine.generate(prompt, max_tokens=24, request_id="smol-v1", seed=3))
        assert set(moved.versions) == {1} and len(moved.token_ids) >= 4
        torch.testing.assert_close(
            torch.tensor(moved.logprobs), learner(moved.token_ids), atol=2e-3, rtol=0
        )
        with lora.adapters_disabled(model):  # the adapters moved it
            assert not torch.allclose(
                learner(moved.token_ids), torch.tensor(moved.logprobs), atol=1e-3
            )
        # the OpenAI endpoint on this engine: a client's call trains exactly what it was
        # sampled, from the prompt the template renders, with the learner's log-probs
        reply, sample = run(_through_the_endpoint(engine, chat))
        assert sample.input_ids[: len(prompt)].tolist() == prompt
        ((start, end),) = sample.turn_spans.reshape(-1, 2).tolist()
        generated = sample.input_ids[start:end].tolist()
        assert start == len(prompt) and reply and reply.strip() in chat.decode(generated)
        torch.testing.assert_close(
            torch.tensor(sample.logprobs[start:end]), learner(generated), atol=2e-3, rtol=0
        )
    finally:
        lm.shutdown_parallel()
        engine.shutdown()
        loop.call_soon_threadsafe(loop.stop)


async def _through_the_endpoint(engine: VllmEngine, chat: ChatTokenizer) -> tuple[str, Any]:
    """One chat call of an episode through the gateway (the `openai` client over ASGI), then
    its reward: the reply's text and the episode's one sample."""
    import httpx
    import openai

    from agentgym_rl.gateway.app import Gateway

    finished: list[Any] = []
    gateway = Gateway(
        engine,
        chat,
        model="smollm2",
        max_model_len=512,
        max_tokens_per_turn=24,
        token="t",
        on_finished=lambda episode, samples: finished.extend(samples),
    )
    transport = httpx.ASGITransport(app=gateway)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as http:
        client = openai.AsyncOpenAI(base_url="http://gateway/v1", api_key="t", http_client=http)
        done = await client.chat.completions.create(
            model="smollm2", messages=[SYSTEM, FIRST], user="smol-ep"
        )
        posted = await http.post(
            "/v1/episodes/smol-ep/reward",
            json={"reward": 1.0},
            headers={"Authorization": "Bearer t"},
        )
    assert posted.status_code == 200, posted.text
    (sample,) = finished
    return done.choices[0].message.content or "", sample
