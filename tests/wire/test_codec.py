"""Golden fixtures and Rust <-> Python interop of the group codec."""

from __future__ import annotations

import json
from pathlib import Path

import msgpack
import numpy as np
import pytest

from agentgym_rl import _core
from agentgym_rl.wire import Status, WireGroup, decode_group, encode_group

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "wire"
STEMS = [
    "group_small",
    "group_all_statuses",
    "group_empty_sample",
    "group_named",
    "group_turn_credit",
    "group_step_context",
]


def load(stem: str) -> tuple[bytes, dict]:
    return (FIXTURES / f"{stem}.msgpack").read_bytes(), json.loads(
        (FIXTURES / f"{stem}.json").read_text()
    )


def check_against_json(g: WireGroup, expected: dict) -> None:
    assert (g.group_id, g.task_id, g.env) == (
        expected["group_id"],
        expected["task_id"],
        expected["env"],
    )
    assert len(g.samples) == len(expected["samples"])
    for s, e in zip(g.samples, expected["samples"], strict=True):
        t = s.tokens
        assert t.input_ids.dtype == np.uint32 and t.input_ids.tolist() == e["input_ids"]
        assert t.loss_mask.dtype == np.uint8 and t.loss_mask.tolist() == e["loss_mask"]
        assert t.logprobs.dtype == np.float32 and t.logprobs.tolist() == e["logprobs"]
        assert t.versions.tolist() == e["versions"]
        assert t.turn_spans.shape == (len(e["turn_spans"]), 2)
        assert t.turn_spans.tolist() == e["turn_spans"]
        assert s.reward == e["reward"] and s.status.value == e["status"]
        assert s.drift == e["drift"]
        assert s.truncated == (e["status"] == "truncated")
        assert s.env_failure == (e["status"] == "env_failure")
        assert (s.turns, s.turn_cap, s.stage, s.dispatch_version) == (
            e["turns"],
            e["turn_cap"],
            e["stage"],
            e["dispatch_version"],
        )
        # fixtures written before request ids name none: they read as ""
        assert s.request_id == e.get("request_id", "")
        # version 1 fixtures have no per-turn arrays: they read as empty ones
        assert s.turn_rewards.dtype == np.float32 and s.turn_keys.dtype == np.uint32
        assert s.turn_rewards.tolist() == e.get("turn_rewards", [])
        assert s.turn_keys.tolist() == e.get("turn_keys", [])
        # before version 3 no sample names its episode: each is an episode of its own
        assert s.episode == e.get("episode")


@pytest.mark.parametrize("stem", STEMS)
def test_python_decodes_rust_golden_bytes(stem: str) -> None:
    data, expected = load(stem)
    g = decode_group(data)
    check_against_json(g, expected)
    # numpy.frombuffer views: no copy, read-only.
    assert not g.samples[0].tokens.input_ids.flags.writeable


@pytest.mark.parametrize("stem", STEMS)
def test_rust_binding_decodes_golden_bytes(stem: str) -> None:
    data, expected = load(stem)
    check_against_json(WireGroup.from_dict(_core.decode_group_dict(data)), expected)
    carrier = _core.decode_group(data)
    assert carrier.group_id == expected["group_id"] and len(carrier) == len(expected["samples"])


@pytest.mark.parametrize("stem", STEMS)
def test_python_encoder_is_byte_identical_to_rust(stem: str) -> None:
    data, _ = load(stem)
    assert encode_group(decode_group(data)) == data
    assert _core.encode_group(_core.decode_group_dict(data)) == data
    assert _core.encode_group(_core.decode_group(data)) == data


def test_python_encoded_message_decodes_in_rust() -> None:
    data, expected = load("group_small")
    g = decode_group(data)
    tokens = g.samples[0].tokens
    # Fresh arrays built in Python (writeable, from lists), a 1-D turn_spans and a float64 reward.
    fresh = WireGroup.from_dict(
        {
            **g.to_dict(),
            "group_id": 2**63 + 1,
            "samples": [
                {
                    **g.samples[0].to_dict(),
                    "reward": 0.1,
                    "tokens": {
                        **tokens.to_dict(),
                        "input_ids": np.array(tokens.input_ids.tolist(), dtype=np.uint32),
                        "turn_spans": tokens.turn_spans.reshape(-1),
                    },
                }
            ],
        }
    )
    back = _core.decode_group_dict(encode_group(fresh))
    assert back["group_id"] == 2**63 + 1
    s = back["samples"][0]
    assert s["tokens"]["input_ids"].tolist() == expected["samples"][0]["input_ids"]
    assert s["tokens"]["turn_spans"].tolist() == expected["samples"][0]["turn_spans"]
    assert s["reward"] == pytest.approx(0.1)
    # msgpack's default float64 is accepted too.
    obj = msgpack.unpackb(encode_group(fresh))
    obj["samples"][0]["reward"] = 0.25
    assert _core.decode_group_dict(msgpack.packb(obj))["samples"][0]["reward"] == 0.25


def _mutated(data: bytes, f) -> bytes:  # type: ignore[no-untyped-def]
    obj = msgpack.unpackb(data)
    f(obj)
    return msgpack.packb(obj, use_bin_type=True)


def _drop_last_logprob(o: dict) -> None:
    lp = o["samples"][0]["tokens"]["logprobs"]
    lp["data"] = lp["data"][:-4]
    lp["shape"] = [lp["shape"][0] - 1]


def _bad_span(o: dict) -> None:
    ts = o["samples"][0]["tokens"]["turn_spans"]
    ts["data"] = np.array([0, 99, 1, 2], dtype="<u4").tobytes()


CASES = [
    ("truncated", lambda d: d[:-7], _core.TruncatedMessageError),
    ("version", lambda d: _mutated(d, lambda o: o.update(v=4)), _core.SchemaVersionError),
    ("version 0", lambda d: _mutated(d, lambda o: o.update(v=0)), _core.SchemaVersionError),
    ("missing", lambda d: _mutated(d, lambda o: o.pop("env")), _core.MissingFieldError),
    (
        "status",
        lambda d: _mutated(d, lambda o: o["samples"][0].update(status="exploded")),
        _core.InvalidValueError,
    ),
    ("length", lambda d: _mutated(d, _drop_last_logprob), _core.InconsistentLengthError),
    ("span", lambda d: _mutated(d, _bad_span), _core.InvalidValueError),
    (
        "dtype",
        lambda d: _mutated(d, lambda o: o["samples"][0]["tokens"]["input_ids"].update(dtype="<i8")),
        _core.MalformedMessageError,
    ),
    ("garbage", lambda d: b"\xc1\xc1\xc1", _core.MalformedMessageError),
    ("trailing", lambda d: d + b"\x00", _core.MalformedMessageError),
]


@pytest.mark.parametrize(("name", "mutate", "exc"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_the_same_typed_error_in_rust_and_python(name, mutate, exc) -> None:  # type: ignore[no-untyped-def]
    data, _ = load("group_small")
    bad = mutate(data)
    with pytest.raises(exc):
        _core.decode_group_dict(bad)
    with pytest.raises(exc):
        decode_group(bad)
    assert issubclass(exc, _core.WireFormatError) and issubclass(exc, _core.AgentGymError)


def test_every_rust_wire_error_variant_has_its_own_exception() -> None:
    classes = {c[2] for c in CASES}
    assert classes == {
        _core.TruncatedMessageError,
        _core.SchemaVersionError,
        _core.MissingFieldError,
        _core.InvalidValueError,
        _core.InconsistentLengthError,
        _core.MalformedMessageError,
    }


def test_random_bytes_never_crash_either_decoder() -> None:
    rng = np.random.default_rng(0)
    data, _ = load("group_all_statuses")
    for _ in range(2000):
        b = bytearray(data)
        for i in rng.integers(0, len(b), size=int(rng.integers(1, 6))):
            b[int(i)] = int(rng.integers(0, 256))
        cut = bytes(b[: int(rng.integers(0, len(b) + 1))])
        for decode in (_core.decode_group_dict, decode_group):
            try:
                decode(cut)
            except _core.WireFormatError:
                pass


def test_encode_rejects_bad_groups() -> None:
    data, _ = load("group_small")
    d = _core.decode_group_dict(data)
    d["samples"][0]["tokens"]["versions"] = d["samples"][0]["tokens"]["versions"][:-1].copy()
    with pytest.raises(_core.InconsistentLengthError):
        _core.encode_group(d)
    d["samples"][0]["tokens"]["versions"] = np.zeros(3, dtype=np.int64)
    with pytest.raises(TypeError):
        _core.encode_group(d)
    assert Status("env_failure") is Status.ENV_FAILURE


def test_request_ids_are_carried_and_optional() -> None:
    data, expected = load("group_named")
    ids = [s["request_id"] for s in expected["samples"]]
    assert ids == ["g42-e0", "g42-e1"]
    assert [s.request_id for s in decode_group(data).samples] == ids
    assert [s.request_id for s in _core.decode_group(data).samples] == ids
    # an unnamed sample writes no key at all (older readers and fixtures stay byte-identical)
    old, _ = load("group_small")
    assert b"request_id" not in old and b"request_id" in data
    unpacked = msgpack.unpackb(data, raw=False)
    del unpacked["samples"][0]["request_id"]
    back = decode_group(msgpack.packb(unpacked, use_bin_type=True, use_single_float=True))
    assert [s.request_id for s in back.samples] == ["", "g42-e1"]


def test_per_turn_arrays_are_version_2_and_checked_alike() -> None:
    data, expected = load("group_turn_credit")
    assert expected["v"] == 2 and msgpack.unpackb(data, raw=False)["v"] == 2
    assert load("group_named")[1]["v"] == 1  # no per-turn arrays: still written as version 1
    carrier = _core.decode_group(data)
    assert carrier.samples[0].turn_rewards.tolist() == [0.25, 0.75]
    assert carrier.samples[1].turn_keys.tolist() == [0xDEADBEEF, 11]
    unpacked = msgpack.unpackb(data, raw=False)
    keys = unpacked["samples"][0]["turn_keys"]
    keys["data"], keys["shape"] = keys["data"][:4], [1]  # one key for two turns
    bad = msgpack.packb(unpacked, use_bin_type=True, use_single_float=True)
    for decode in (decode_group, _core.decode_group):
        with pytest.raises(_core.InconsistentLengthError, match="turn_keys"):
            decode(bad)
    sample = carrier.samples[0]
    with pytest.raises(_core.SampleError, match="turn_rewards"):
        _core.Sample(
            sample.input_ids,
            sample.loss_mask,
            sample.logprobs,
            sample.versions,
            sample.turn_spans,
            reward=1.0,
            status="done",
            turn_rewards=np.array([1.0], np.float32),  # two turns
        )


def test_episodes_named_by_samples_are_version_3_and_checked_alike() -> None:
    data, expected = load("group_step_context")
    assert expected["v"] == 3 and msgpack.unpackb(data, raw=False)["v"] == 3
    assert [s.episode for s in _core.decode_group(data).samples] == [0, 0, 1]
    assert b"episode" not in load("group_turn_credit")[0]  # no episode named: version 2 bytes
    for episodes in ([0, None, 1], [1, 1, 2], [0, 2, 2]):
        unpacked = msgpack.unpackb(data, raw=False)
        for s, e in zip(unpacked["samples"], episodes, strict=True):
            if e is None:
                del s["episode"]
            else:
                s["episode"] = e
        bad = msgpack.packb(unpacked, use_bin_type=True, use_single_float=True)
        for decode in (decode_group, _core.decode_group):
            with pytest.raises(_core.InvalidValueError, match="episode"):
                decode(bad)
