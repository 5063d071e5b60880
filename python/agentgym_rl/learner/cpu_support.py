"""CPU stand-ins for the six places where megatron-core 0.16.1 assumes a CUDA device.

Megatron-core's local (non-Transformer-Engine) `GPTModel` runs on CPU with a gloo process group
once these six CUDA-only pieces are replaced. Nothing else in Megatron is patched, and on a
machine with CUDA every function here is a no-op, so the GPU path is exactly upstream Megatron.

1. **Global memory buffer** (`parallel_state._GLOBAL_MEMORY_BUFFER`). `DotProductAttention`
   takes its `baddbmm` scratch tensor from this buffer, which allocates on
   `torch.cuda.current_device()`. `install_cpu_runtime` swaps the instance that
   `initialize_model_parallel` created for `CpuMemoryBuffer`, the same cache allocating on CPU.
2. **RNG state tracker** (`tensor_parallel.random._CUDA_RNG_STATE_TRACKER`). Dropout regions
   run inside `get_cuda_rng_tracker().fork()`, which swaps CUDA generator states.
   `install_cpu_runtime` installs `CpuRNGStatesTracker`: `add(name, seed)` records a CPU
   generator state and `fork(name)` swaps the CPU default generator to it for the duration of
   the block (a no-op context while no state of that name was added). Megatron's own
   `model_parallel_cuda_manual_seed` then seeds it unchanged.
3. **Rotary embedding** (`RotaryEmbedding.get_emb`). On first use it moves `inv_freq` to
   `torch.cuda.current_device()` whenever it sits on CPU. `adapt_model_for_cpu` rebinds
   `get_emb` on that one model's instance to a version that keeps the device.

4. **Autocast in the linear layers' backward.** Megatron's tensor-parallel linear autograd
   Functions (`LinearWithGradAccumulationAndAsyncCommunication`, `LinearWithFrozenWeight`)
   are wrapped in `torch.amp.custom_fwd/custom_bwd(device_type="cuda")`, which replays the
   forward's CUDA autocast state in the backward. Under CPU autocast (bf16 precision) the
   backward would then multiply a bf16 output gradient with the fp32 weight and fail.
   `install_cpu_runtime` wraps both Functions' forward/backward to record the forward's CPU
   autocast dtype and run the backward under it: the same replay, for the "cpu" device. The
   wrapper changes nothing when CPU autocast is off.

5. **Tied embeddings across pipeline stages.** With pp > 1 and tied embeddings, the
   `GPTModel` constructor moves the last stage's copy of the word embeddings with `.cuda()`
   before summing it with the first stage's over the embedding group. `host_construction`
   wraps the constructor so that `Tensor.cuda` leaves tensors where they are for that call
   only (on a machine without CUDA it would raise).

6. **Distributed checkpointing.** `dist_checkpointing.save` synchronises the CUDA stream after
   copying tensors to host memory and builds its failure flag on `torch.cuda.current_device()`.
   `host_checkpointing` makes `torch.cuda.synchronize` a no-op and `current_device` "cpu" for
   the duration of a save or load (tensors already live on the host).

Megatron's default causal mask (`transformer.utils.get_default_causal_mask`) is also built on
"cuda"; `agentgym_rl.learner.model` sidesteps it by always passing an explicit mask rather than
by a substitution.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch
from megatron.core import parallel_state
from megatron.core.models.common.embeddings.rotary_pos_embedding import RotaryEmbedding
from megatron.core.tensor_parallel import layers as mcore_layers
from megatron.core.tensor_parallel import random as mcore_random
from megatron.core.utils import GlobalMemoryBuffer

__all__ = [
    "CpuMemoryBuffer",
    "CpuRNGStatesTracker",
    "adapt_model_for_cpu",
    "cpu_mode",
    "host_checkpointing",
    "host_construction",
    "install_cpu_runtime",
]


def cpu_mode() -> bool:
    """True when no CUDA device is usable: the substitutions apply only then."""
    return not torch.cuda.is_available()


class CpuMemoryBuffer(GlobalMemoryBuffer):
    """`GlobalMemoryBuffer` that keeps its cached scratch tensors in host memory."""

    def get_tensor(
        self,
        tensor_shape: tuple[int, ...] | list[int] | torch.Size,
        dtype: torch.dtype,
        name: str,
        mem_alloc_context: Callable[[], contextlib.AbstractContextManager[object]] | None = None,
    ) -> torch.Tensor:
        """A view of at least `prod(tensor_shape)` cached elements keyed by (name, dtype)."""
        del mem_alloc_context  # only meaningful for CUDA allocators
        numel = 1
        for dim in tensor_shape:
            numel *= int(dim)
        cached: torch.Tensor | None = self.buffer.get((name, dtype))
        if cached is None or cached.numel() < numel:
            cached = torch.empty(numel, dtype=dtype, device="cpu", requires_grad=False)
            self.buffer[(name, dtype)] = cached
        return cached[:numel].view(*tensor_shape)


class CpuRNGStatesTracker(mcore_random.CudaRNGStatesTracker):
    """Megatron's named RNG-state tracker, backed by the CPU default generator."""

    def __init__(self) -> None:
        super().__init__(use_cudagraphable_rng=False, is_inference_rng_tracker=False)

    def add(self, name: str, seed: int) -> None:
        """Record the CPU generator state that `torch.manual_seed(seed)` would give, as `name`."""
        if seed in self.seeds_:
            raise ValueError(f"seed {seed} already exists")
        if name in self.states_:
            raise ValueError(f"rng state {name!r} already exists")
        self._is_initialized = True
        self.seeds_.add(seed)
        self.states_[name] = torch.Generator().manual_seed(seed).get_state()

    @contextlib.contextmanager
    def fork(self, name: str = mcore_random._MODEL_PARALLEL_RNG_TRACKER_NAME) -> Iterator[None]:
        """Run the block on the CPU generator state `name`, then restore the caller's state.

        Without a state of that name (no seed was set) the block runs on the current state.
        """
        if name not in self.states_:
            yield
            return
        outer = torch.get_rng_state()
        torch.set_rng_state(self.states_[name])
        try:
            yield
        finally:
            self.states_[name] = torch.get_rng_state()
            torch.set_rng_state(outer)


def _replay_cpu_autocast_in_backward(function: type[torch.autograd.Function]) -> None:
    """Substitution 4 on one autograd Function (idempotent)."""
    if getattr(function, "_cpu_autocast_replay", False):
        return
    forward, backward = function.forward, function.backward

    def forward_recording(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        on = torch.is_autocast_enabled("cpu")
        ctx.cpu_autocast_dtype = torch.get_autocast_dtype("cpu") if on else None
        return forward(ctx, *args, **kwargs)

    def backward_replaying(ctx: Any, *grads: Any) -> Any:
        if ctx.cpu_autocast_dtype is None:
            return backward(ctx, *grads)
        with torch.autocast("cpu", dtype=ctx.cpu_autocast_dtype):
            return backward(ctx, *grads)

    function.forward = staticmethod(forward_recording)  # type: ignore[method-assign,assignment]
    function.backward = staticmethod(backward_replaying)  # type: ignore[method-assign,assignment]
    function._cpu_autocast_replay = True  # type: ignore[attr-defined]


def install_cpu_runtime() -> bool:
    """Install substitutions 1, 2 and 4 when running without CUDA; returns whether it did.

    Call after `parallel_state.initialize_model_parallel` (which creates the buffer being
    replaced) and before building models. Idempotent; a no-op when CUDA is available.
    """
    if not cpu_mode():
        return False
    if not parallel_state.model_parallel_is_initialized():
        raise RuntimeError("initialize_model_parallel must run before install_cpu_runtime")
    if not isinstance(parallel_state._GLOBAL_MEMORY_BUFFER, CpuMemoryBuffer):
        parallel_state._GLOBAL_MEMORY_BUFFER = CpuMemoryBuffer()
    if not isinstance(mcore_random._CUDA_RNG_STATE_TRACKER, CpuRNGStatesTracker):
        mcore_random._CUDA_RNG_STATE_TRACKER = CpuRNGStatesTracker()
        mcore_random._CUDA_RNG_STATE_TRACKER_INITIALIZED = True
    _replay_cpu_autocast_in_backward(mcore_layers.LinearWithGradAccumulationAndAsyncCommunication)
    _replay_cpu_autocast_in_backward(mcore_layers.LinearWithFrozenWeight)
    return True


def _host_rope_emb(self: RotaryEmbedding, max_seq_len: int, offset: int = 0) -> torch.Tensor:
    """`RotaryEmbedding.get_emb` without the move to CUDA: [seq, 1, 1, rotary dim]."""
    freqs = self.get_freqs_non_repeated(max_seq_len, offset)
    if self.rotary_interleaved:
        emb = torch.stack((freqs, freqs), dim=-1).view(freqs.shape[0], -1)
    else:
        emb = torch.cat((freqs, freqs), dim=-1)
    return emb[:, None, None, :]


@contextlib.contextmanager
def host_construction() -> Iterator[None]:
    """Substitution 5: `Tensor.cuda` is the identity inside the block (CPU only)."""
    if not cpu_mode():
        yield
        return
    original = torch.Tensor.cuda
    torch.Tensor.cuda = lambda self, *args, **kwargs: self  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        torch.Tensor.cuda = original  # type: ignore[method-assign]


@contextlib.contextmanager
def host_checkpointing() -> Iterator[None]:
    """Substitution 6: no CUDA stream to wait for, the host as the current device (CPU only)."""
    if not cpu_mode():
        yield
        return
    synchronize, current_device = torch.cuda.synchronize, torch.cuda.current_device
    torch.cuda.synchronize = lambda *args, **kwargs: None  # type: ignore[assignment]
    torch.cuda.current_device = lambda: "cpu"  # type: ignore[assignment,return-value]
    try:
        yield
    finally:
        torch.cuda.synchronize = synchronize
        torch.cuda.current_device = current_device


def adapt_model_for_cpu(model: torch.nn.Module) -> torch.nn.Module:
    """Apply substitution 3 to every `RotaryEmbedding` inside `model` (CPU only); returns it."""
    if cpu_mode():
        for module in model.modules():
            if isinstance(module, RotaryEmbedding):
                module.get_emb = types.MethodType(_host_rope_emb, module)
    return model
