"""Env options (`--env-option KEY=VALUE`, strings) read by one set of rules for every env: a bad
value fails the env's construction naming the env, the option and what was expected."""

from __future__ import annotations

import pytest

from agentgym_envs import load_env
from agentgym_envs.server.env_options import flag_option, float_option, int_option


def test_values_are_parsed_and_bounded() -> None:
    assert int_option("e", "n", "3", 1) == 3 and int_option("e", "n", 0, 0) == 0
    assert float_option("e", "t", "0.5", 0.1) == 0.5
    assert flag_option("e", "f", "Yes") and not flag_option("e", "f", "off")
    with pytest.raises(ValueError, match=r"e option n='x': expected an integer"):
        int_option("e", "n", "x", 1)
    with pytest.raises(ValueError, match=r"e option n=0: must be >= 1"):
        int_option("e", "n", "0", 1)
    with pytest.raises(ValueError, match=r"e option t=0.0: must be >= 0.1"):
        float_option("e", "t", "0", 0.1)
    with pytest.raises(ValueError, match="expected true or false"):
        flag_option("e", "f", "maybe")


@pytest.mark.parametrize(
    ("env", "option", "message"),
    [
        ("searchqa", {"topk": "0"}, "searchqa option topk='0': must be >= 1"),
        ("searchqa", {"end_on_wrong": "perhaps"}, "searchqa option end_on_wrong='perhaps'"),
        ("miniwob", {"step_ms": "fast"}, "miniwob option step_ms='fast': expected an integer"),
    ],
)
def test_envs_refuse_bad_options_by_name(env: str, option: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_env(env, **option)
