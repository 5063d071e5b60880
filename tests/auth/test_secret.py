"""The run's secret: written 0600, found in the config's file before the environment, refused
when unfit, and required wherever a stream reaches beyond this host."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest

from agentgym_rl.auth import (
    ENV_VAR,
    SecretError,
    check_exposure,
    is_local_endpoint,
    read_secret,
    secret_for,
    write_secret_file,
)
from agentgym_rl.cli import main


def test_the_command_writes_a_new_secret_only_its_owner_can_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cluster" / "secret"
    assert main(["secret", str(path)]) == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    first = path.read_text().strip()
    assert len(first) == 64 and int(first, 16) >= 0
    assert "secret_file" in capsys.readouterr().out
    # An existing secret is kept unless replaced on purpose, and a new one differs.
    assert main(["secret", str(path)]) == 2
    assert "--force" in capsys.readouterr().err
    assert path.read_text().strip() == first
    assert main(["secret", str(path), "--force"]) == 0
    assert path.read_text().strip() != first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_config_file_comes_before_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_secret_file(tmp_path / "secret")
    monkeypatch.setenv(ENV_VAR, "e" * 32)
    assert read_secret(path) == path.read_text().strip().encode()
    assert read_secret(None) == b"e" * 32
    monkeypatch.delenv(ENV_VAR)
    assert read_secret(None) is None


def test_unfit_secrets_are_refused_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_secret_file(tmp_path / "secret")
    path.chmod(0o644)
    with pytest.raises(SecretError, match="chmod 600"):
        read_secret(path)
    with pytest.raises(SecretError, match="cannot read"):
        read_secret(tmp_path / "missing")
    monkeypatch.setenv(ENV_VAR, "short")
    with pytest.raises(SecretError, match="at least 16"):
        read_secret(None)


@pytest.mark.parametrize(
    ("endpoint", "local"),
    [
        ("tcp://127.0.0.1:5555", True),
        ("tcp://127.0.0.5:5555", True),
        ("tcp://localhost:5555", True),
        ("tcp://[::1]:5555", True),
        ("ipc:///tmp/agentgym.sock", True),
        ("tcp://*:5555", False),
        ("tcp://0.0.0.0:5555", False),
        ("tcp://10.0.0.7:5555", False),
        ("tcp://learner-0:5555", False),
    ],
)
def test_local_endpoints(endpoint: str, local: bool) -> None:
    assert is_local_endpoint(endpoint) is local


def test_no_secret_beyond_this_host_refuses_unless_allowed(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    local = ["tcp://127.0.0.1:5555", "ipc:///tmp/x"]
    exposed = ["tcp://*:5555", "tcp://127.0.0.1:5557"]
    check_exposure(None, local, allow_unauthenticated=False, role="learn")
    check_exposure(b"s" * 32, exposed, allow_unauthenticated=False, role="learn")
    with pytest.raises(SecretError) as err:
        secret_for(None, exposed, allow_unauthenticated=False, role="learn")
    message = str(err.value)
    assert "tcp://*:5555" in message and "agentgym-rl secret" in message
    assert "allow_unauthenticated" in message
    with caplog.at_level(logging.WARNING):
        assert secret_for(None, exposed, allow_unauthenticated=True, role="learn") is None
    assert "tcp://*:5555" in caplog.text
