"""Environment dependencies, checked before a run starts anything.

Contract: `env_problems(names)` returns one message per environment that cannot be served on
this machine: the env servers' package `agentgym_envs` is not installed, the env is unknown to
its catalog or broken (its module fails to import, a missing Python package; it misses a method;
two packages claim its name), or a program it declares it needs (`needs`: Java for SciWorld,
Chromium for the web envs) is not on PATH. Each message names the fix. Loading the env's class is
what `env serve` does first, so a check that passes here means the server will at least load.

`bf16_problems(asked)` returns one message per setting that asks for bfloat16 (its key path and
the float32 value that replaces it) when this machine would compute it in software: no NVIDIA
GPU, and a CPU whose flags name no bf16 instructions (x86 `avx512_bf16` or `amx_bf16`, Arm
`bf16`). On such a CPU (an AVX2 EPYC here) a bf16 matmul took 224 ms against float32's 2.7 ms
(512 x 512, torch: 84x) and vLLM generated 22 tokens/s in bf16 against 89 in float32 (SmolLM2,
16 x 32 tokens: 4x): a run sized for bf16 would take hours. Where /proc/cpuinfo is not readable
nothing is said.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from agentgym_rl.env_discovery import EnvsNotInstalled, env_class

_INSTALL_HINT = (
    "Install its dependencies (`pip install agentgym-envs` installs those of the built-in envs; "
    "an env with heavy needs has an extra, e.g. `pip install 'agentgym-envs[sciworld]'`)"
)


def env_problems(names: list[str], where: str = "env_servers") -> list[str]:
    """Why each of `names` (env names or `module:Class` references) cannot be served here."""
    problems: list[str] = []
    for i, name in enumerate(names):
        key = f"{where}.{i}.env"
        try:
            cls = env_class(name)
        except EnvsNotInstalled as e:
            return [f"{where}: {e}"]
        except LookupError as e:
            hint = f". {_INSTALL_HINT}" if getattr(e, "missing_module", None) else ""
            problems.append(f"{key}: {e}{hint}")
            continue
        for program, fix in cls.needs.items():
            if shutil.which(program) is None:
                problems.append(f"{key}: environment {name!r} needs `{program}` on PATH: {fix}")
    return problems


_BF16_FLAGS = {"avx512_bf16", "amx_bf16", "bf16"}


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> tuple[str, set[str]] | None:
    """The CPU's model name and instruction flags (x86 `flags`, Arm `Features`), or None."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return None
    name, flags = "", set[str]()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not name:
            name = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
    return name or "this CPU", flags


def bf16_problems(asked: dict[str, str], cpuinfo: Path = Path("/proc/cpuinfo")) -> list[str]:
    """See the module docstring; `asked` maps each key path asking for bf16 to its float32."""
    if not asked or shutil.which("nvidia-smi") is not None:
        return []
    cpu = cpu_flags(cpuinfo)
    if cpu is None or cpu[1] & _BF16_FLAGS:
        return []
    name, flags = cpu
    has = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX"
    return [
        f"{key}: bf16 on a CPU without bf16 instructions ({name}, {has}): computed in "
        f"software, far slower than float32 (measured on one: torch's matmul 84x, vLLM's "
        f"generation 4x); set {key}={fp32}"
        for key, fp32 in asked.items()
    ]
