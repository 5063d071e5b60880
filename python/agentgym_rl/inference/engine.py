"""`VllmEngine`: the `Engine` protocol on vLLM 0.32's `AsyncLLM`, with live weight updates.

Token-in/token-out: prompts go in as ids (`TokensPrompt`), sampled ids and the log-probability
of each sampled token come out (`logprobs=0`, engine arg `logprobs_mode="processed_logprobs"`,
i.e. after temperature/top-p, the distribution actually sampled). Nothing is detokenized.

Per-token policy versions: outputs stream as deltas; each new token is stamped with this
engine's version when it arrives. vLLM also stamps every engine step with the engine core's
weight version (set here at each update) and returns contiguous spans on the final output; when
those spans are present they are used, since they are exact even for tokens that were still in
flight between the engine core and this process when the version moved.

Context: `EngineOptions.max_model_len=None` (the default, as in `EngineConfig`) runs the model's
own context (`max_position_embeddings` of its config.json); a larger explicit value is refused
before vLLM starts. Any start-up failure raises `EngineStartError`, whose message is one line
naming the model and the root cause (the chained exception keeps vLLM's traceback).

Live updates (`update_weights`): `pause_generation(mode="keep")` freezes in-flight requests
without aborting them, the new tensors are loaded into every worker, the version moves forward
and `resume_generation()` lets the frozen requests continue under the new weights. Versions only
move forward. The tensors reach the workers by `collective_rpc` into
`agentgym_rl.inference.worker.WeightLoaderExtension`, which runs vLLM's layerwise reload (an NCCL
path had no caller and was removed; see docs/weights.md).

On CPU the model worker runs inside vLLM's engine-core process, whose OpenMP threads wait
passively and whose eager engine compiles nothing (`cpu_engine_environment`).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agentgym_rl.config.rollout import EngineConfig
from agentgym_rl.episode.types import FinishReason, Generation
from agentgym_rl.inference.adapters import (
    MergedAdapters,
    ServedAdapters,
    lora_engine_args,
    served_rank,
)
from agentgym_rl.weights.peft import AdapterError, is_adapter_update

log = logging.getLogger(__name__)

STOP_GRACE_S = 1.0
"""How long the engine core may take to exit after its SIGTERM before vLLM kills its tree. Its
own teardown (two full garbage collections of its unfrozen heap, then interpreter exit) takes
~5 s on 2 CPU cores and frees nothing the operating system does not free at exit."""

WORKER_EXTENSION = "agentgym_rl.inference.worker.WeightLoaderExtension"


class StaleVersionError(ValueError):
    """An update's version is not newer than the engine's current version."""


class EngineStartError(RuntimeError):
    """vLLM did not start. `str(e)` is one line, `could not start vLLM on MODEL: <cause>`; the
    original exception (vLLM's traceback) is chained as `__cause__`."""


_SETTINGS = EngineConfig()
"""The defaults of the sampling and context settings (defined once, in `EngineConfig`)."""


@dataclass
class EngineOptions:
    """How the vLLM engine is built and how it samples. The sampling and context fields are
    `config.rollout.EngineConfig`'s, with its defaults; `from_config` makes the options from a
    validated one, the rest are the engine's own knobs."""

    max_model_len: int | None = _SETTINGS.max_model_len
    """Context length in tokens; None: the model's own (`max_position_embeddings`). A larger
    value than the model's raises `EngineStartError` at start. The started engine's `options`
    hold the resolved length."""
    temperature: float = _SETTINGS.temperature
    top_p: float = _SETTINGS.top_p
    top_k: int = -1
    seed: int = _SETTINGS.seed
    """Engine-wide RNG seed; a request may also carry its own `seed`."""
    enforce_eager: bool = True
    dtype: str = _SETTINGS.dtype
    max_num_seqs: int = 128
    kv_cache_memory_bytes: int | None = 256 << 20
    """KV-cache size (on CPU this replaces VLLM_CPU_KVCACHE_SPACE); None: vLLM's default."""
    gpu_memory_utilization: float = _SETTINGS.gpu_memory_utilization
    clear_cache_on_update: bool = True
    """Drop the prefix/KV cache when weights change (cached keys/values are from old weights)."""
    initial_version: int = 0
    max_lora_rank: int | None = None
    """Take the policy as LoRA adapters of at most this rank (`learn.lora`): updates carry
    adapters alone, each version generating with its own (`inference/adapters.py`)."""
    lora_serving: str = _SETTINGS.lora_serving
    """`merged` (each version merged into the base weights here) or `adapters` (vLLM serves
    them as LoRA adapters)."""
    max_loras: int = 4
    """Adapter versions generating at once (requests of older versions finish with theirs)."""
    extra_engine_args: dict[str, Any] = field(default_factory=dict)
    sampling_args: dict[str, Any] = field(default_factory=dict)
    """Extra `vllm.SamplingParams` fields set on every request, e.g. `{"structured_outputs":
    StructuredOutputsParams(regex=...)}` (benchmarks constrain the output format this way)."""

    @classmethod
    def from_config(cls, config: EngineConfig, **engine_knobs: Any) -> EngineOptions:
        """The options of an engine that runs `config`'s sampling and context settings;
        `engine_knobs` set the engine's own fields (`max_num_seqs`, `kv_cache_memory_bytes`...)."""
        return cls(
            max_model_len=config.max_model_len,
            temperature=config.temperature,
            top_p=config.top_p,
            seed=config.seed,
            dtype=config.dtype,
            gpu_memory_utilization=config.gpu_memory_utilization,
            max_lora_rank=config.max_lora_rank,
            lora_serving=config.lora_serving,
            **engine_knobs,
        )


_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length", "abort": "abort"}


class VllmEngine:
    """An `Engine` backed by one `AsyncLLM`. Build it with `await VllmEngine.start(...)`."""

    def __init__(
        self, llm: Any, model_dir: Path, options: EngineOptions, stop_ids: list[int]
    ) -> None:
        self._llm = llm
        self.model_dir = model_dir
        self.options = options
        self.stop_token_ids = stop_ids
        self.logprobs_mode = "processed_logprobs"
        self._version = options.initial_version
        self._update_lock = asyncio.Lock()
        self.adapters: ServedAdapters | None = None
        """With `max_lora_rank` and `lora_serving: adapters`: the adapters new requests generate
        with."""
        self.merging: MergedAdapters | None = None
        """With `max_lora_rank` and `lora_serving: merged`: what merges each version."""
        self.updates_applied = 0
        self.updates_rejected = 0

    @classmethod
    async def start(cls, model_dir: str | Path, options: EngineOptions | None = None) -> VllmEngine:
        """Start the engine (spawns vLLM's engine-core process; call under a `__main__` guard).

        Raises `EngineStartError` (one line) when the context does not fit the model or vLLM
        fails to start.
        """
        from agentgym_rl.config.startup import context_misfit, model_positions

        opts = options or EngineOptions()
        path = Path(model_dir)
        misfit = context_misfit(path, opts.max_model_len, "max_model_len")
        if misfit:
            raise EngineStartError(f"could not start vLLM on {path}: {misfit}")
        if opts.max_model_len is None:
            # Unknown here (a RoPE scaling factor, no max_position_embeddings): vLLM derives it.
            opts = replace(opts, max_model_len=model_positions(path))
        try:
            engine = await cls._start(path, opts)
        except Exception as e:
            log.debug("vLLM start-up failed on %s", path, exc_info=True)
            raise EngineStartError(f"could not start vLLM on {path}: {root_cause(e)}") from e
        try:
            await engine._llm.update_weight_version(str(engine._version))
        except BaseException:  # Ctrl-C while it starts: the engine core stops with us
            engine.shutdown()
            raise
        note = dtype_note(path, opts.dtype, str(engine._llm.model_config.dtype))
        if note:
            log.warning("%s", note)
        return engine

    @classmethod
    async def _start(cls, path: Path, opts: EngineOptions) -> VllmEngine:
        from transformers import AutoTokenizer
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.usage.usage_lib import UsageContext
        from vllm.v1.engine.async_llm import AsyncLLM

        tokenizer = AutoTokenizer.from_pretrained(str(path))
        stop_ids = sorted({int(tokenizer.eos_token_id), *_generation_eos_ids(path)})
        # No local holds the AsyncLLM: a traceback that vLLM keeps from a lazy import made
        # during start-up pins this frame, and a frame pinning the AsyncLLM would keep it alive
        # until interpreter exit (see `shutdown`).
        with cpu_engine_environment(opts):
            engine = cls(
                AsyncLLM.from_engine_args(
                    AsyncEngineArgs(**engine_args(path, opts)),
                    usage_context=UsageContext.ENGINE_CONTEXT,
                ),
                path,
                opts,
                stop_ids,
            )
        if engine.options.max_model_len is None:
            engine.options = replace(
                opts, max_model_len=int(engine._llm.model_config.max_model_len)
            )
        if opts.max_lora_rank is not None and opts.lora_serving == "merged":
            engine.merging = MergedAdapters(path, opts.max_lora_rank)
        elif opts.max_lora_rank is not None:
            import tempfile

            root = Path(tempfile.mkdtemp(prefix="agentgym-adapters-"))
            rank = served_rank(opts.max_lora_rank)
            engine.adapters = ServedAdapters(
                root, str(path), rank, opts.initial_version, keep=2 * opts.max_loras
            )
        return engine

    @property
    def version(self) -> int:
        """The policy version of the weights currently loaded."""
        return self._version

    @property
    def kv_cache_tokens(self) -> int | None:
        """Tokens the KV cache holds, as the engine core reported it at start (None: unknown)."""
        cache = getattr(getattr(self._llm, "vllm_config", None), "cache_config", None)
        blocks, size = getattr(cache, "num_gpu_blocks", None), getattr(cache, "block_size", None)
        return blocks * size if isinstance(blocks, int) and isinstance(size, int) else None

    @property
    def max_model_len(self) -> int:
        """The context length this engine runs, in tokens (resolved at start)."""
        n = self.options.max_model_len
        if n is None:  # only an engine built outside `start` can get here
            raise RuntimeError("VllmEngine: max_model_len unresolved; build it with `start`")
        return n

    def _sampling_params(
        self,
        max_tokens: int,
        seed: int | None,
        ignore_eos: bool,
        temperature: float | None,
        stop: Sequence[str] = (),
    ) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        o = self.options
        return SamplingParams(
            n=1,
            temperature=o.temperature if temperature is None else temperature,
            top_p=o.top_p,
            top_k=o.top_k,
            max_tokens=max_tokens,
            logprobs=0,
            stop_token_ids=[] if ignore_eos else list(self.stop_token_ids),
            ignore_eos=ignore_eos,
            seed=seed,
            # stop strings are matched on text: only then is the turn detokenized
            stop=list(stop) or None,
            include_stop_str_in_output=True,
            detokenize=bool(stop),
            skip_special_tokens=False,
            output_kind=RequestOutputKind.DELTA,
            **o.sampling_args,
        )

    async def generate(
        self,
        prompt_ids: list[int],
        *,
        max_tokens: int,
        request_id: str,
        seed: int | None = None,
        ignore_eos: bool = False,
        on_tokens: Callable[[int], None] | None = None,
        temperature: float | None = None,
        stop: Sequence[str] = (),
    ) -> Generation:
        """Continue `prompt_ids` by one turn; stops on the tokenizer's eos/stop ids (kept) or
        after the first of the `stop` strings (kept; the ids are the sampled ones, so the last
        token may reach past the string's end).

        `seed` makes this request's sampling reproducible; `ignore_eos` (benchmarks, tests)
        generates exactly `max_tokens`; `on_tokens(n)` is called with the number of tokens
        received so far after each streamed delta (progress, tests); `temperature` overrides
        the engine's for this request (evaluation; 0 is greedy). Training requests never set
        it: the learner recomputes log-probs at the engine's temperature.
        """
        from vllm.inputs import TokensPrompt

        budget = min(max_tokens, self.max_model_len - len(prompt_ids))
        if budget <= 0:
            return Generation(token_ids=[], logprobs=[], versions=[], finish_reason="length")
        ids: list[int] = []
        lps: list[float] = []
        versions: list[int] = []
        finish = "abort"
        spans: Any = None
        # with adapters a request generates with what served when it started, to its end
        served = self.adapters
        adapter = served.current if served is not None else None
        started_at = served.version if served is not None else None
        stream = self._llm.generate(
            TokensPrompt(prompt_token_ids=list(prompt_ids)),
            self._sampling_params(budget, seed, ignore_eos, temperature, stop),
            request_id,
            lora_request=adapter,
        )
        async for out in stream:
            comp = out.outputs[0]
            new = list(comp.token_ids)
            stamp = self._version if started_at is None else started_at
            for i, tok in enumerate(new):
                ids.append(int(tok))
                lps.append(_sampled_logprob(comp.logprobs, i, int(tok)))
                versions.append(stamp)
            if on_tokens is not None and new:
                on_tokens(len(ids))
            if comp.finish_reason is not None:
                finish = comp.finish_reason
                spans = getattr(comp, "weight_versions", None)
        if spans and adapter is None:
            versions = _versions_from_spans(spans, len(ids), versions)
        return Generation(
            token_ids=ids,
            logprobs=lps,
            versions=versions,
            finish_reason=_FINISH.get(str(finish), "abort"),
        )

    def _check_version(self, version: int) -> None:
        if version <= self._version:
            self.updates_rejected += 1
            raise StaleVersionError(
                f"update to version {version} rejected: engine is at {self._version}"
            )

    async def update_weights(self, version: int, named_tensors: Any) -> float:
        """Load HF-named tensors as policy `version` (must be newer); returns seconds taken.
        LoRA adapters (PEFT names) are served as adapters or merged first (`lora_serving`).

        In-flight requests are frozen (`pause_generation(mode="keep")`), not aborted: tokens
        sampled after this returns carry `version`. An older or equal version raises
        `StaleVersionError` and leaves the weights untouched.
        """
        from agentgym_rl.inference.worker import to_payload

        tensors = dict(named_tensors)
        adapters = is_adapter_update(tensors)
        if adapters and self.merging is None:
            return await self._load_adapters(version, tensors)
        async with self._update_lock:
            self._check_version(version)
            t0 = time.perf_counter()
            if adapters:  # merged here, off the event loop: requests keep streaming
                assert self.merging is not None
                tensors = await asyncio.to_thread(self.merging.merged, tensors)
            payload = to_payload(tensors)
            await self._llm.pause_generation(
                mode="keep", clear_cache=self.options.clear_cache_on_update
            )
            try:
                await self._llm.collective_rpc("agentgym_load_weights", args=(payload,))
                await self._llm.update_weight_version(str(version))
                self._version = version
                if self.adapters is not None:
                    self.adapters.drop(version)  # full weights: no adapter on top of them
                self.updates_applied += 1
            finally:
                await self._llm.resume_generation()
            return time.perf_counter() - t0

    async def _load_adapters(self, version: int, tensors: dict[str, Any]) -> float:
        """A version of adapters: written as a PEFT folder (off the event loop: requests keep
        streaming), the next requests generate with it (no pause: a running request finishes
        with the adapters it started with)."""
        served = self.adapters
        if served is None:
            raise AdapterError(
                "adapters arrived but this engine serves full weights: start it with "
                "max_lora_rank (rollout.engine.max_lora_rank, set by train from learn.lora)"
            )
        async with self._update_lock:
            self._check_version(version)
            t0 = time.perf_counter()
            await asyncio.to_thread(served.load, version, tensors)
            self._version = version
            self.updates_applied += 1
            return time.perf_counter() - t0

    def serve_adapter(self, folder: Path) -> None:
        """Generate with the PEFT adapter in `folder` from now on, at the current version
        (`eval --adapter`); the engine must have started with `max_lora_rank`."""
        if self.adapters is None:
            raise AdapterError("serve_adapter needs an engine started with max_lora_rank")
        self.adapters.serve(folder, self._version)

    async def drop_prefix_cache(self) -> None:
        """Forget the cached prompt prefixes (benches measure prefill from a cold cache)."""
        await self._llm.reset_prefix_cache()

    def shutdown(self) -> None:
        """Stop the engine-core process and release its sockets (idempotent).

        The `AsyncLLM` is dropped and collected here, while the interpreter is fully alive:
        left to interpreter exit, its `__del__` runs against torn-down module globals.
        """
        if self.adapters is not None:
            self.adapters.close()
        llm, self._llm = self._llm, None
        if llm is None:
            return
        # vLLM warns at every kill after the grace; here that is the expected path, not news
        kill_log = logging.getLogger("vllm.v1.utils")
        level = kill_log.level
        kill_log.setLevel(logging.ERROR)
        try:
            llm.shutdown(timeout=STOP_GRACE_S)
        finally:
            kill_log.setLevel(level)
        del llm
        gc.collect()


def dtype_note(path: Path, asked: str, running: str) -> str | None:
    """One line when the engine runs another dtype than the checkpoint's, saying which and why;
    None when they agree (or the checkpoint says none)."""
    import json

    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        return None
    stored = config.get("dtype") or config.get("torch_dtype")
    running = running.removeprefix("torch.")
    if not isinstance(stored, str) or stored == running:
        return None
    why = (
        "dtype auto: vLLM's choice on this platform; --dtype float32 (engine.dtype) keeps it"
        if asked == "auto"
        else f"dtype {asked} asked"
    )
    return f"vLLM runs {path.name} in {running}, its checkpoint is {stored} ({why})"


@contextmanager
def cpu_engine_environment(opts: EngineOptions) -> Iterator[None]:
    """On a CPU build of vLLM, what its engine-core process reads at start, set in this
    process's environment while the engine core is spawned (each only where the user has not
    set it; all but the first are restored after, so nothing this process starts later, nor a
    Python session that called the API, inherits them):

    - `VLLM_ENABLE_V1_MULTIPROCESSING=0`: the model worker runs inside the engine-core process
      rather than in a third process of its own. vLLM's CPU platform replaces the in-process
      executor with its multiprocessing one otherwise; `AsyncLLM` ignores the variable, so its
      engine core stays a process of its own and this process is untouched. Each spawned
      process imports vLLM and torch afresh: measured on 2 cores, one process fewer took an
      engine's start from 40 to 21 s and its first batch from 19 to 2.6 s, at the same tokens/s.
      vLLM's warning that the variable seeds the launching process holds for its in-process
      `LLM` only: it is muted.
    - `OMP_WAIT_POLICY=PASSIVE`: vLLM's OpenMP threads sleep at a barrier instead of spinning.
      An engine takes every core while a learner, env servers or another engine share them; a
      thread spinning for a descheduled peer burns the core the peer waits for. Measured on 2
      cores beside a busy process: the tiny model's 40 decode steps took 5 s spinning, 0.3 s
      passive, and a tiny `train`'s engine core 38 against 23 CPU-seconds.
    - `TORCHDYNAMO_DISABLE=1` when the engine runs eager (`enforce_eager`, the default): the
      only compiled code left is vLLM's sampler ops, compiled by torch inductor in every engine
      start (its precompiled C++ header lands in the temporary folder, which is per command
      here: `processes.ownership`), ~15 CPU-seconds of the first batch, for kernels no faster
      than eager ones at these sizes.
    """
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        yield
        return
    if "VLLM_ENABLE_V1_MULTIPROCESSING" not in os.environ:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        logging.getLogger("vllm.engine.arg_utils").addFilter(_SeedWarningFilter())
    scoped = {"OMP_WAIT_POLICY": "PASSIVE"}
    if opts.enforce_eager:
        scoped["TORCHDYNAMO_DISABLE"] = "1"
    added = [key for key in scoped if key not in os.environ]
    os.environ.update({key: scoped[key] for key in added})
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


class _SeedWarningFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "VLLM_ENABLE_V1_MULTIPROCESSING" not in record.getMessage()


def engine_args(path: Path, opts: EngineOptions) -> dict[str, Any]:
    """vLLM's engine arguments for `opts` on the model at `path` (`VllmEngine` builds its
    `AsyncLLM` from them; a bench builds vLLM's offline `LLM` from the same)."""
    kwargs: dict[str, Any] = dict(
        model=str(path),
        tokenizer=str(path),
        max_model_len=opts.max_model_len,
        seed=opts.seed,
        enforce_eager=opts.enforce_eager,
        dtype=opts.dtype,
        max_num_seqs=opts.max_num_seqs,
        gpu_memory_utilization=opts.gpu_memory_utilization,
        logprobs_mode="processed_logprobs",
        worker_extension_cls=WORKER_EXTENSION,
        disable_log_stats=True,
        enable_prefix_caching=True,
    )
    if opts.kv_cache_memory_bytes is not None:
        kwargs["kv_cache_memory_bytes"] = opts.kv_cache_memory_bytes
    if opts.max_lora_rank is not None and opts.lora_serving == "adapters":
        kwargs.update(lora_engine_args(opts.max_lora_rank, opts.max_loras))
    return {**kwargs, **opts.extra_engine_args}


def root_cause(exc: BaseException) -> str:
    """The innermost cause of `exc` (explicit `raise from` first, else the implicit context), as
    one line: `Type: message`, the first error of a pydantic validation error, at most 400
    characters."""
    seen: set[int] = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        nxt = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
        if nxt is None:
            break
        exc = nxt
    errors = getattr(exc, "errors", None)
    message = str(exc)
    if callable(errors):
        try:
            first = errors()[0]
            message = str(first.get("msg", message)).removeprefix("Value error, ")
        except Exception:  # not a pydantic error after all: keep str(exc)
            pass
    line = " ".join(message.split()) or "(no message)"
    if len(line) > 400:
        line = line[:397] + "..."
    return f"{type(exc).__name__}: {line}"


def _generation_eos_ids(path: Path) -> list[int]:
    import json

    cfg = path / "generation_config.json"
    if not cfg.exists():
        return []
    eos = json.loads(cfg.read_text()).get("eos_token_id")
    if eos is None:
        return []
    return [int(e) for e in (eos if isinstance(eos, list) else [eos])]


def _sampled_logprob(logprobs: Any, i: int, tok: int) -> float:
    if logprobs is None:
        return math.nan
    entry = logprobs[i]
    return float(entry[tok].logprob)


def _versions_from_spans(spans: Any, n: int, fallback: list[int]) -> list[int]:
    out = list(fallback)
    for span in spans:
        version, start, end = _span_fields(span)
        try:
            v = int(version)
        except (TypeError, ValueError):
            continue
        for j in range(max(0, start), min(n, end)):
            out[j] = v
    return out


def _span_fields(span: Any) -> tuple[Any, int, int]:
    if isinstance(span, tuple | list):
        return span[0], int(span[1]), int(span[2])
    return span.version, int(span.start), int(span.end)
