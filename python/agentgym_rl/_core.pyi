"""Type stubs for the Rust extension ``agentgym_rl._core``."""

from typing import Any, final

import numpy as np
import numpy.typing as npt

__version__: str

class AgentGymError(Exception):
    """Base class of every error raised by agentgym_rl's Rust core."""

# --- carriers ---

class SampleError(AgentGymError):
    """A sample's arrays do not line up, or a field is out of range."""

@final
class Sample:
    """One finished episode: per-token arrays plus episode fields."""

    def __new__(
        cls,
        input_ids: npt.NDArray[np.uint32],
        loss_mask: npt.NDArray[np.uint8],
        logprobs: npt.NDArray[np.float32],
        versions: npt.NDArray[np.uint32],
        turn_spans: npt.NDArray[np.uint32],
        *,
        reward: float,
        status: str,
        drift: bool = False,
        turns: int = 0,
        turn_cap: int = 0,
        stage: int = 0,
        dispatch_version: int = 0,
        request_id: str = "",
        turn_rewards: npt.NDArray[np.float32] | None = None,
        turn_keys: npt.NDArray[np.uint32] | None = None,
        episode: int | None = None,
    ) -> Sample: ...
    @property
    def input_ids(self) -> npt.NDArray[np.uint32]: ...
    @property
    def loss_mask(self) -> npt.NDArray[np.uint8]: ...
    @property
    def logprobs(self) -> npt.NDArray[np.float32]: ...
    @property
    def versions(self) -> npt.NDArray[np.uint32]: ...
    @property
    def turn_spans(self) -> npt.NDArray[np.uint32]: ...
    @property
    def reward(self) -> float: ...
    @property
    def status(self) -> str:
        """One of "done", "turn_cap", "truncated", "env_failure", "aborted"."""
    @property
    def drift(self) -> bool: ...
    @property
    def truncated(self) -> bool: ...
    @property
    def env_failure(self) -> bool: ...
    @property
    def turns(self) -> int: ...
    @property
    def turn_cap(self) -> int: ...
    @property
    def stage(self) -> int: ...
    @property
    def dispatch_version(self) -> int: ...
    @property
    def request_id(self) -> str:
        """The episode's request id ("" when not named): joins trained samples to episode logs."""
    @property
    def turn_rewards(self) -> npt.NDArray[np.float32]:
        """Per generated turn: the reward it earned (empty: not given, all on the last turn)."""
    @property
    def turn_keys(self) -> npt.NDArray[np.uint32]:
        """Per generated turn: a key of the state it acted from (empty: not given)."""
    @property
    def episode(self) -> int | None:
        """Its episode's place in the group when some episode of the group trained as several
        samples (set by the buffer when the group completes); None: an episode of its own."""
    def __len__(self) -> int: ...

@final
class Group:
    """n samples of one task (a GRPO group)."""

    def __new__(cls, group_id: int, task_id: str, env: str, samples: list[Sample]) -> Group: ...
    @property
    def group_id(self) -> int: ...
    @property
    def task_id(self) -> str: ...
    @property
    def env(self) -> str: ...
    @property
    def samples(self) -> list[Sample]: ...
    @property
    def rewards(self) -> list[float]: ...
    def min_version(self) -> int | None: ...
    def __len__(self) -> int: ...

# --- trajectory ---

class TrajectoryError(AgentGymError):
    """Base class of trajectory-builder errors."""

class TokenizerLoadError(TrajectoryError):
    """tokenizer.json could not be loaded."""

class ChatConfigError(TrajectoryError):
    """No chat template, or a malformed tokenizer_config.json."""

class TemplateSyntaxError(TrajectoryError):
    """The chat template does not parse."""

class TemplateRenderError(TrajectoryError):
    """The chat template failed to render (raise_exception included)."""

class TokenizeError(TrajectoryError):
    """The tokenizer failed to encode or decode."""

class PlaceholderNotFoundError(TrajectoryError):
    """The template does not render assistant content verbatim."""

class BaseNotPrefixError(TrajectoryError):
    """The template is not append-only: no observation delta exists."""

class DriftError(TrajectoryError):
    """Strict mode: the built ids differ from a full render."""

class TrajectoryInputError(TrajectoryError):
    """Inconsistent input (lengths, empty turn, order, bad JSON)."""

@final
class ChatTokenizer:
    """tokenizer.json + chat template rendered with transformers' semantics. Messages and tool
    schemas are JSON strings (``agentgym_rl.trajectory`` wraps this with lists of dicts)."""

    @staticmethod
    def from_dir(path: str) -> ChatTokenizer: ...
    @staticmethod
    def from_parts(
        tokenizer_json: str, chat_template: str, special_tokens: dict[str, str] | None = None
    ) -> ChatTokenizer: ...
    def render(
        self,
        messages_json: str,
        *,
        add_generation_prompt: bool = False,
        tools_json: str | None = None,
    ) -> str: ...
    def apply_chat_template(
        self,
        messages_json: str,
        *,
        add_generation_prompt: bool = False,
        tools_json: str | None = None,
    ) -> npt.NDArray[np.uint32]: ...
    def encode(self, text: str) -> npt.NDArray[np.uint32]: ...
    def decode(self, ids: list[int]) -> str: ...
    def token_to_id(self, token: str) -> int | None: ...
    @property
    def eos_token_id(self) -> int | None: ...
    @property
    def drift_count(self) -> int:
        """Episodes whose finish() found drift."""
    @property
    def checked_count(self) -> int:
        """Episodes checked for drift by finish()."""
    def prompt(self, messages_json: str, tools_json: str | None = None) -> Prompt: ...

@final
class Prompt:
    """An episode's rendered, tokenized prefix; shareable by the samples of a group."""

    @property
    def ids(self) -> npt.NDArray[np.uint32]: ...
    @property
    def closing(self) -> str:
        """What the template writes after an assistant turn's content."""
    def __len__(self) -> int: ...

@final
class DriftReport:
    @property
    def offset(self) -> int | None:
        """Byte offset of the first difference; None when exact."""
    @property
    def expected(self) -> str: ...
    @property
    def actual(self) -> str: ...
    @property
    def clean(self) -> bool: ...

@final
class Trajectory:
    """Finished arrays (owned by numpy, no copy)."""

    @property
    def input_ids(self) -> npt.NDArray[np.uint32]: ...
    @property
    def loss_mask(self) -> npt.NDArray[np.uint8]: ...
    @property
    def logprobs(self) -> npt.NDArray[np.float32]: ...
    @property
    def versions(self) -> npt.NDArray[np.uint32]: ...
    @property
    def turn_spans(self) -> npt.NDArray[np.uint32]:
        """[s0, e0, s1, e1, ...] token offsets of generated turns."""
    @property
    def truncated(self) -> bool: ...
    @property
    def drift(self) -> bool: ...
    @property
    def turns(self) -> int: ...
    @property
    def prompt_len(self) -> int: ...
    def __len__(self) -> int: ...

@final
class TrajectoryBuilder:
    """Token-in/token-out builder of one episode."""

    def __new__(
        cls,
        chat: ChatTokenizer,
        prompt: Prompt,
        *,
        max_len: int = 32768,
        stop_ids: list[int] | None = None,
        check_drift: bool = True,
        strict: bool = False,
        prompt_version: int = 0,
    ) -> TrajectoryBuilder: ...
    def add_generated(
        self, ids: list[int], logprobs: list[float], version: int | list[int]
    ) -> bool:
        """Append a generated turn verbatim; False if it did not fit (now truncated)."""
    def add_observation(self, messages_json: str) -> bool:
        """Append one env step's messages as template delta; False if it did not fit."""
    def check_drift(self) -> DriftReport: ...
    def finish(self) -> Trajectory: ...
    def __len__(self) -> int: ...
    @property
    def ids(self) -> npt.NDArray[np.uint32]:
        """The token ids built so far: what the engine continues next."""
    @property
    def remaining(self) -> int: ...
    @property
    def truncated(self) -> bool: ...
    @property
    def turns(self) -> int: ...
    @property
    def expects_generation(self) -> bool: ...
    @property
    def stop_ids(self) -> list[int]: ...

# --- buffer ---

class BufferStateError(AgentGymError): ...
class BufferConfigError(BufferStateError): ...
class UnknownGroupError(BufferStateError): ...
class VersionRegressionError(BufferStateError): ...

@final
class Ticket:
    """Permission to run one group."""

    @property
    def group_id(self) -> int: ...
    @property
    def dispatch_version(self) -> int: ...

@final
class TrajectoryBuffer:
    """GRPO grouping with staleness admission control and bounded memory."""

    def __new__(
        cls,
        *,
        group_size: int,
        groups_per_step: int,
        max_staleness: int,
        max_in_flight: int,
        max_ready: int,
        filter_zero_variance: bool = False,
        start_version: int = 0,
        first_group_id: int = 0,
    ) -> TrajectoryBuffer:
        """``start_version``: the policy version a server joins the run at (the staleness
        budget counts versions from there); ``first_group_id``: where group ids start."""
    @property
    def version(self) -> int: ...
    @property
    def group_size(self) -> int: ...
    @property
    def groups_per_step(self) -> int: ...
    @property
    def max_in_flight(self) -> int:
        """Groups that may run at once; settable while running (at least 1, else
        BufferConfigError): a lowered cap lets running groups finish and starts none until below it;
        the staleness budget is unchanged."""
    @max_in_flight.setter
    def max_in_flight(self, value: int) -> None: ...
    def capacity(self) -> int: ...
    def try_admit(self, task_id: str, env: str) -> Ticket | None: ...
    def add_sample(self, group_id: int, sample: Sample) -> str:
        """Returns "pending", "ready" or "filtered"."""
    def add_episode(self, group_id: int, samples: list[Sample]) -> str:
        """One episode as several samples (each trains); `group_size` episodes make the group.
        When some episode of a completed group gave several, every sample of it names its
        episode (`Sample.episode`). Returns "pending", "ready" or "filtered"."""
    def abort_group(self, group_id: int) -> int: ...
    def set_version(self, version: int) -> None: ...
    def pop_ready(self) -> Group | None: ...
    def requeue_front(self, group: Group) -> None: ...
    def counters(self) -> dict[str, int]: ...

# --- wire ---

WIRE_SCHEMA_VERSION: int

class WireFormatError(AgentGymError):
    """A group message could not be encoded or decoded."""

class TruncatedMessageError(WireFormatError):
    """The message ended before a complete value was read."""

class MalformedMessageError(WireFormatError):
    """The bytes do not follow the group schema."""

class SchemaVersionError(WireFormatError):
    """The message was written under an unsupported schema version."""

class MissingFieldError(WireFormatError):
    """A required key is absent."""

class InvalidValueError(WireFormatError):
    """A value is outside its domain (unknown status, span out of range, ...)."""

class InconsistentLengthError(WireFormatError):
    """Per-token arrays or a shape and its data disagree in length."""

def decode_group(data: bytes) -> Group:
    """Decode a group message into the ``Group`` carrier (GIL released)."""

def decode_group_dict(data: bytes) -> dict[str, Any]:
    """Decode a group message into a dict whose arrays are numpy arrays (no copy):
    ``{"v", "group_id", "task_id", "env", "samples": [{"tokens": {"input_ids", "loss_mask",
    "logprobs", "versions", "turn_spans" (shape (k, 2))}, "reward", "status", "drift", "turns",
    "turn_cap", "stage", "dispatch_version", "request_id", "turn_rewards", "turn_keys",
    "episode"}]}``; ``"v"`` is 3 when a sample names its episode, else 2 when a sample has
    per-turn arrays, else 1."""

def encode_group(group: Group | dict[str, Any]) -> bytes:
    """Encode a ``Group`` carrier or a dict shaped like ``decode_group_dict``'s result."""

# --- transport ---

TRANSPORT_PROTOCOL_VERSION: int

class TransportError(AgentGymError):
    """A group transport failed."""

class TransportTimeout(TransportError):
    """No credit (or acknowledgement) arrived in time; nothing was queued."""

class TransportClosed(TransportError):
    """The sender or receiver is closed."""

class TransportLinkDown(TransportError):
    """flush(while_linked=True): the link to the receiver is down with groups unacknowledged."""

class ProtocolError(TransportError):
    """The peer speaks another protocol version or sent an unacceptable message."""

class TransportSocketError(TransportError):
    """The socket layer failed (address in use, ...)."""

class InvalidEndpointError(TransportError):
    """The endpoint is not tcp://HOST:PORT or ipc://PATH."""

class TransportForkedError(TransportError):
    """Used in a forked child; create a new one there."""

class TransportRuntimeError(TransportError):
    """The background runtime could not start."""

class AuthenticationError(TransportError):
    """The peer's messages are unsigned or signed with another secret."""

@final
class GroupSender:
    """Rollout side: streams encoded groups to a ``GroupReceiver`` under credit.

    Keeps every group until acknowledged; reconnects, handshakes again and resends after a lost
    link. ``send`` waits for credit up to its timeout, then raises ``TransportTimeout`` with
    nothing queued."""

    def __new__(
        cls,
        endpoint: str,
        sender_id: str | None = None,
        *,
        heartbeat_s: float = 0.5,
        peer_timeout_s: float = 3.0,
        handshake_timeout_s: float = 2.0,
        max_reconnect_interval_s: float = 1.0,
        secret: bytes | None = None,
    ) -> GroupSender:
        """With ``secret`` (16+ bytes) every message is signed (HMAC-SHA256) and only replies
        signed with it are accepted; a receiver without it, or with another, stops the sender
        with ``AuthenticationError``."""
    @property
    def endpoint(self) -> str: ...
    @property
    def sender_id(self) -> str: ...
    def send(self, payload: bytes, timeout_s: float = 60.0) -> int:
        """Queue one group; returns its sequence number."""
    def flush(self, timeout_s: float = 60.0, *, while_linked: bool = False) -> None:
        """Wait until every sent group is acknowledged (through reconnections); with
        ``while_linked``, raise ``TransportLinkDown`` once no link is in force instead."""
    def wait_connected(self, timeout_s: float = 60.0) -> None: ...
    def stats(self) -> dict[str, int | bool]:
        """sent, acked, unacked, resent, handshakes, credit, connected, unauthenticated."""
    def close(self) -> None: ...
    def __enter__(self) -> GroupSender: ...
    def __exit__(self, *exc: object) -> None: ...

@final
class GroupReceiver:
    """Learner side: binds a ROUTER (127.0.0.1 with an OS-chosen port by default), grants each
    sender ``window`` credits and acknowledges a group when ``recv`` hands it out."""

    def __new__(
        cls, bind: str = "tcp://127.0.0.1:0", *, window: int = 16, secret: bytes | None = None
    ) -> GroupReceiver:
        """With ``secret`` (16+ bytes) only messages signed with it are accepted; the others
        are refused, counted (``stats()["unauthenticated"]``) and listed by ``take_refusals``."""
    @property
    def endpoint(self) -> str:
        """The bound endpoint, with the actual port."""
    def recv(self, timeout_s: float = 1.0) -> tuple[str, bytes] | None:
        """``(sender_id, payload)``, or None on timeout."""
    def recv_seq(self, timeout_s: float = 1.0) -> tuple[str, int, bytes] | None:
        """``(sender_id, seq, payload)``, or None on timeout."""
    def stats(self) -> dict[str, int]:
        """received, delivered, duplicates, gaps, handshakes, rejected, unauthenticated,
        senders."""
    def take_refusals(self) -> list[tuple[str, str]]:
        """``(peer address, reason)`` of each message refused for want of a valid signature
        since the last call (at most 64)."""
    def close(self) -> None: ...
    def __enter__(self) -> GroupReceiver: ...
    def __exit__(self, *exc: object) -> None: ...

# --- envpool ---
from collections.abc import Awaitable, Sequence  # noqa: E402

class EnvPoolError(AgentGymError):
    """An env pool call failed."""

class UnknownEnvError(EnvPoolError):
    """No server is configured for this environment."""

class NoServerUpError(EnvPoolError):
    """Every server of this environment is down."""

class UnknownEpisodeError(EnvPoolError):
    """The episode is not live in this pool."""

class EnvRefusedError(EnvPoolError):
    """The server refused the request; the episode is intact."""

class EnvTimeoutError(EnvPoolError):
    """No reply in time (after retries, for idempotent calls)."""

class EnvConnectionError(EnvPoolError):
    """The connection to the server failed."""

class MalformedReplyError(EnvPoolError):
    """The server's reply could not be understood."""

class HttpStatusError(EnvPoolError):
    """The server answered with an HTTP status other than 200."""

class EnvFailureError(EnvPoolError):
    """A step failed ambiguously: the episode is over and counts as an environment failure."""

class EnvPoolConfigError(EnvPoolError):
    """The pool configuration is invalid."""

class EnvPoolRuntimeError(EnvPoolError):
    """The pool's background runtime could not start."""

class EnvPoolForkedError(EnvPoolError):
    """The pool was created in another process (before fork); create a new one."""

class EnvPoolClosedError(EnvPoolError):
    """The pool is shut down."""

@final
class EnvServer:
    """One env server: ``http://host:port`` (AgentGym HTTP protocol, in ``dialect`` agentgym,
    searchqa or webarena) or ``tcp://host:port`` (native ZeroMQ protocol)."""

    def __new__(
        cls, env: str, address: str, *, dialect: str = "agentgym", max_inflight: int = 64
    ) -> EnvServer: ...
    @property
    def env(self) -> str: ...
    @property
    def address(self) -> str: ...
    @property
    def max_inflight(self) -> int: ...

@final
class StepOutcome:
    """What a reset or step produced; ``invalid``: the server refused the action (the turn was
    spent, nothing happened; False when the server does not say); ``info`` is the server's info
    field as JSON text."""

    @property
    def observation(self) -> str: ...
    @property
    def reward(self) -> float: ...
    @property
    def score(self) -> float: ...
    @property
    def done(self) -> bool: ...
    @property
    def invalid(self) -> bool: ...
    @property
    def info(self) -> str | None: ...

@final
class CreatedEpisode:
    """A new episode: its handle, its server, and the first observation when create resets."""

    @property
    def episode(self) -> int: ...
    @property
    def server(self) -> str: ...
    @property
    def first(self) -> StepOutcome | None: ...

@final
class EnvServerStatus:
    """One server as the pool sees it, plus the server's own last health report."""

    @property
    def env(self) -> str: ...
    @property
    def address(self) -> str: ...
    @property
    def up(self) -> bool: ...
    @property
    def live_episodes(self) -> int: ...
    @property
    def inflight(self) -> int: ...
    @property
    def generation(self) -> int: ...
    @property
    def reported_live_episodes(self) -> int | None: ...
    @property
    def uptime_s(self) -> float | None: ...

@final
class EnvPool:
    """Async connections to many env servers: balancing, health checks, deadlines, safe
    retries. Methods return asyncio awaitables (call them inside a running loop)."""

    def __new__(
        cls,
        servers: Sequence[EnvServer],
        *,
        balance: str = "least_loaded",
        health_interval_s: float = 1.0,
        retries: int = 3,
        retry_delay_s: float = 0.05,
        pool_idle_timeout_s: float = 4.0,
        connect_timeout_s: float = 2.0,
        create_timeout_s: float = 30.0,
        reset_timeout_s: float = 30.0,
        step_timeout_s: float = 60.0,
        observation_timeout_s: float = 10.0,
        close_timeout_s: float = 10.0,
        health_timeout_s: float = 2.0,
    ) -> EnvPool: ...
    def create(self, env: str) -> Awaitable[CreatedEpisode]: ...
    def reset(self, episode: int, data_idx: int) -> Awaitable[StepOutcome]: ...
    def step(self, episode: int, action: str) -> Awaitable[StepOutcome]:
        """Never replayed: an ambiguous failure raises EnvFailureError and ends the episode."""
    def step_many(
        self, items: Sequence[tuple[int, str]]
    ) -> Awaitable[list[StepOutcome | EnvPoolError]]:
        """One result per item, in order: the outcome or the exception instance."""
    def observation(self, episode: int) -> Awaitable[str]: ...
    def close(self, episode: int) -> Awaitable[None]: ...
    def check_health(self) -> Awaitable[None]: ...
    def shutdown(self) -> Awaitable[None]:
        """Close every live episode, stop health checks, drop connections."""
    def servers(self) -> list[EnvServerStatus]: ...
    @property
    def live_episodes(self) -> int: ...
