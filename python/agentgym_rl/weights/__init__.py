"""Weight updates from the learner to the rollout servers.

`schema.py` (wire format), `publisher.py` (learner side, ZeroMQ ROUTER), `subscriber.py`
(rollout side: reassemble, verify, apply through a callback such as `VllmEngine.update_weights`)
and `apply.py` (the vLLM worker extension that loads HF-named tensors). docs/weights.md has the
protocol and the GPU (NCCL) variant. Importing this package does not import the ZeroMQ modules;
vLLM worker processes import only `apply.py`.
"""
