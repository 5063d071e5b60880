"""Probe: does this vLLM build serve LoRA on CPU? A tiny Qwen2, a PEFT adapter written by hand,
greedy logprobs with and without the adapter, against HF with the adapter merged."""
import json, sys, time
from pathlib import Path
import torch
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from vllm_fixtures import tiny_corpus
from agentgym_rl.policy_creation import create_tiny_model
from safetensors.torch import save_file

def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "runs/lora_probe")
    out.mkdir(parents=True, exist_ok=True)
    model = out / "model"
    if not (model / "config.json").exists():
        create_tiny_model(model, corpus=tiny_corpus(), vocab_size=320, seed=0)
    cfg = json.loads((model / "config.json").read_text())
    h, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    heads, kvh = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    hd = cfg.get("head_dim") or h // heads
    r, alpha = 4, 8.0
    g = torch.Generator().manual_seed(0)
    tensors = {}
    for i in range(L):
        for proj, o, inn in (("q_proj", heads * hd, h), ("k_proj", kvh * hd, h), ("v_proj", kvh * hd, h), ("o_proj", h, heads * hd)):
            pre = f"base_model.model.model.layers.{i}.self_attn.{proj}"
            tensors[f"{pre}.lora_A.weight"] = 0.3 * torch.randn(r, inn, generator=g)
            tensors[f"{pre}.lora_B.weight"] = 0.3 * torch.randn(o, r, generator=g)
    ad = out / "adapter"
    ad.mkdir(exist_ok=True)
    save_file(tensors, str(ad / "adapter_model.safetensors"))
    (ad / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "r": r, "lora_alpha": alpha, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"],
        "bias": "none", "base_model_name_or_path": str(model), "task_type": "CAUSAL_LM", "lora_dropout": 0.0,
        "fan_in_fan_out": False, "use_rslora": False, "modules_to_save": None,
    }))
    from vllm import LLM, SamplingParams
    from vllm.lora.request import LoRARequest
    t0 = time.time()
    try:
        llm = LLM(model=str(model), enable_lora=True, max_lora_rank=8, max_loras=2, dtype="float32",
                  max_model_len=256, enforce_eager=True, gpu_memory_utilization=0.3, max_num_seqs=4)
    except Exception as e:
        print("ENGINE FAILED:", type(e).__name__, str(e)[:2000]); raise
    prompt = {"prompt_token_ids": [1, 20, 31, 42, 53, 64]}
    sp = SamplingParams(max_tokens=6, temperature=0.0, logprobs=0)
    base = llm.generate([prompt], sp)[0].outputs[0]
    lo = llm.generate([prompt], sp, lora_request=LoRARequest("v1", 1, str(ad)))[0].outputs[0]
    print("base", base.token_ids, [round(list(d.values())[0].logprob, 4) for d in base.logprobs])
    print("lora", lo.token_ids, [round(list(d.values())[0].logprob, 4) for d in lo.logprobs])
    # HF with merged adapter on the lora tokens
    from transformers import AutoModelForCausalLM
    hf = AutoModelForCausalLM.from_pretrained(str(model), dtype=torch.float32).eval()
    with torch.no_grad():
        sd = hf.state_dict()
        for k, A in tensors.items():
            if k.endswith("lora_A.weight"):
                B = tensors[k.replace("lora_A", "lora_B")]
                name = k.replace("base_model.model.", "").replace(".lora_A.weight", ".weight")
                sd[name] += alpha / r * B @ A
        hf.load_state_dict(sd)
        ids = torch.tensor([[1, 20, 31, 42, 53, 64] + list(lo.token_ids)])
        lp = torch.log_softmax(hf(ids).logits[0, 5:-1].float(), -1)
        print("hf merged", [round(float(lp[k, t]), 4) for k, t in enumerate(lo.token_ids)])
    print("seconds", round(time.time() - t0, 1))

if __name__ == '__main__':
    main()
