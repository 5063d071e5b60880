"""Group messages on the wire and the group stream between rollout and learner.

* ``decode_group`` / ``encode_group``: the pure-Python codec (msgpack + ``numpy.frombuffer``),
  interoperable byte-for-byte with the Rust codec (``agentgym_rl._core.decode_group`` and
  friends).
* ``GroupSender`` / ``GroupReceiver``: the Rust ZeroMQ transport (credit flow control, acks,
  resending after reconnection). Pure-pyzmq peers of the same protocol live with the interop
  tests (``tests/transport/pyzmq_*.py``), not here.
"""

from agentgym_rl._core import GroupReceiver, GroupSender
from agentgym_rl.wire.codec import SCHEMA_VERSION, decode_group, encode_group
from agentgym_rl.wire.types import Status, WireGroup, WireSample, WireTokens

__all__ = [
    "SCHEMA_VERSION",
    "GroupReceiver",
    "GroupSender",
    "Status",
    "WireGroup",
    "WireSample",
    "WireTokens",
    "decode_group",
    "encode_group",
]
