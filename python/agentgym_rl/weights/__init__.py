"""Weight updates from the learner to the rollout servers.

`schema.py` (wire format), `publisher.py` (learner side, ZeroMQ ROUTER: plans the relay tree),
`subscriber.py` (rollout side: reassemble, verify, apply through a callback such as
`VllmEngine.update_weights`), `relay.py` (a subscriber forwarding verified chunks to the
rollout servers below it in the tree), `receiver.py` (the subscriber as a task of a rollout server's event loop, with the gate that
holds generation until the server has the learner's version). What applies an update inside
vLLM's workers is the inference engine's (`inference/worker.py`). docs/weights.md has the
protocol (ZeroMQ on every cluster; there is no NCCL path). Importing this package does not import
the ZeroMQ modules.
"""
