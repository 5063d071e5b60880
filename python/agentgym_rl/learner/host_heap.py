"""The learner's heap on a CPU: glibc's malloc, bounded so a long run does not grow into the
memory its rollout server needs.

Left to itself, glibc serves a freed block of up to 32 MB from its heap ever after (its mmap
threshold rises to the largest block freed), and a step's activations, logits and gradients,
of other sizes each step (the episodes' lengths vary), fragment that heap: SmolLM2-135M's learner
(2,048-token micro-batches, bf16 autocast) went from 5.0 to 7.6 GB resident over 6 steps, its
peak from 5.3 to 8.0 GB, and a run's learner was killed for memory at step 12. Blocks of 1 MB
and more now come from the kernel each time and go back to it when freed (the threshold fixed:
3.3 to 4.1 GB over the same 6 steps, peak 4.2 to 5.9 GB, at ~28% more time a step, 50 s not
39: fresh pages for each large block), and what the heap holds free is handed back after each
step (that alone: 3.2 to 3.7 GB at rest, but a peak still 5.3 to 7.7 GB, at no cost in time).
Measured on 2 cores with `gpu_check`'s workload of two groups of eight 300-700-token episodes;
in a real run (docs/results/smollm2-goto, seed 1) both together kept the learner's peak at
5.4-6.2 GB over 10 steps, at the unbounded pilots' tokens a second.
A GPU learner's tensors are not on this heap: nothing is changed there, nor off glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)
LARGE_BLOCK_BYTES = 1 << 20


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


_LIBC = _libc()


def bound_heap() -> bool:
    """Serve blocks of `LARGE_BLOCK_BYTES` and more by mmap, always; False off glibc."""
    if _LIBC is None:
        return False
    if _LIBC.mallopt(M_MMAP_THRESHOLD, LARGE_BLOCK_BYTES) != 1:
        log.warning("glibc refused mallopt(M_MMAP_THRESHOLD): the learner's heap is not bounded")
        return False
    return True


def release_free_memory() -> None:
    """Hand what the heap holds free back to the kernel (after a step: it is the step's)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
