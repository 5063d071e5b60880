"""Pipeline parallelism: this rank's stage of a GPipe schedule over torch.distributed send/recv.

Contract. `run_stages(items, forward, hidden_shape, model=..., backward=...)` runs every
micro-batch of one step through this rank's pipeline stage and returns, on the last stage,
what `forward` returned for each item (None elsewhere):

* a stage other than the first receives each micro-batch's hidden states ``[s, b, h]`` (fp32)
  from the previous stage and hands them to Megatron with `model.set_input_tensor`;
* `forward(item)` runs this stage's part: on a stage other than the last it returns the hidden
  states, which go on to the next stage (as fp32: the receiver's buffer dtype never depends on
  autocast); on the last it returns ``(loss, result)``, `loss` None when only `result` is
  wanted (a forward-only pass: proximal or reference log-probs);
* with `backward`, once every forward is done, the micro-batches run backward in reverse
  order: the last stage backpropagates its loss, the others the gradient the next stage sends
  back for their output, and every stage but the first sends its input's gradient back.

GPipe (all forwards, then all backwards) holds every micro-batch's activations at once, for a
simple schedule that cannot deadlock with blocking send/recv, which gloo (CPU) and NCCL both
provide. Megatron's own 1F1B schedules allocate their buffers on "cuda" and so do not run on
CPU; this one runs on both. With one stage `run_stages` backpropagates each micro-batch right
after its forward (one micro-batch's activations at a time), the learner's path without
pipeline parallelism.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch
from megatron.core import parallel_state

Item = TypeVar("Item")

StageForward = Callable[[Item], Any]
"""Last stage: ``(loss or None, result)``; other stages: the hidden states ``[s, b, h]``."""


def is_last_stage() -> bool:
    return bool(parallel_state.is_pipeline_last_stage())


def is_first_stage() -> bool:
    return bool(parallel_state.is_pipeline_first_stage())


def _recv(shape: tuple[int, ...], src: int, device: torch.device) -> torch.Tensor:
    buf = torch.empty(shape, dtype=torch.float32, device=device)
    torch.distributed.recv(buf, src=src)
    return buf


def _send(tensor: torch.Tensor, dst: int) -> None:
    torch.distributed.send(tensor.detach().float().contiguous(), dst=dst)


def run_stages(
    items: Sequence[Item],
    forward: StageForward[Item],
    hidden_shape: Callable[[Item], tuple[int, int, int]],
    *,
    model: Any,
    backward: bool,
    device: torch.device,
) -> list[Any]:
    """One step's micro-batches through this stage (see the module docstring)."""
    if parallel_state.get_pipeline_model_parallel_world_size() == 1:
        done: list[Any] = []
        for item in items:
            loss, result = forward(item)
            if backward and loss is not None:
                loss.backward()
            done.append(result)
        return done
    first, last = is_first_stage(), is_last_stage()
    prev_rank = parallel_state.get_pipeline_model_parallel_prev_rank()
    next_rank = parallel_state.get_pipeline_model_parallel_next_rank()
    inputs: list[torch.Tensor | None] = []
    outputs: list[Any] = []
    results: list[Any] = []
    for item in items:
        x = None
        if not first:
            x = _recv(hidden_shape(item), prev_rank, device).requires_grad_(backward)
            model.set_input_tensor(x)
        out = forward(item)
        if last:
            loss, result = out
            results.append(result)
            outputs.append(loss)
        else:
            _send(out, next_rank)
            outputs.append(out)
            results.append(None)
        inputs.append(x)
    if backward:
        for x, out in zip(reversed(inputs), reversed(outputs), strict=True):
            if last:
                if out is not None:
                    out.backward()
            else:
                grad = _recv(tuple(out.shape), next_rank, device)
                torch.autograd.backward(out, grad.to(out.dtype))
            if x is not None:
                _send(x.grad if x.grad is not None else torch.zeros_like(x), prev_rank)
    return results


def from_last_stage(obj: Any) -> Any:
    """`obj` as the last pipeline stage of this rank's pipeline has it (collective over the
    pipeline group; the identity with one stage)."""
    if parallel_state.get_pipeline_model_parallel_world_size() == 1:
        return obj
    ranks = torch.distributed.get_process_group_ranks(
        parallel_state.get_pipeline_model_parallel_group()
    )
    box = [obj]
    torch.distributed.broadcast_object_list(
        box, src=ranks[-1], group=parallel_state.get_pipeline_model_parallel_group()
    )
    return box[0]


__all__ = ["StageForward", "from_last_stage", "is_first_stage", "is_last_stage", "run_stages"]
