"""A local judge server that dies mid-run is restarted and nothing is lost: the server is a child
process of its owner (`LocalJudgeServer`, here running tests/scripted_judge.py under uvicorn in
place of vLLM's OpenAI server), killed with its process group while a group's requests are in
flight; the requests that found it dead wait for one restart and are asked again."""

from __future__ import annotations

import asyncio
import shlex
import sys
from pathlib import Path

import pytest

from agentgym_rl.judging.client import ChatEndpoint
from agentgym_rl.judging.judge import Judge
from agentgym_rl.judging.rubric import Transcript
from agentgym_rl.judging.serving import LocalJudgeServer, RestartingEndpoint
from agentgym_rl.processes.child import ChildSpec
from agentgym_rl.processes.ports import free_port

pytestmark = pytest.mark.process
TESTS = Path(__file__).resolve().parents[1]
WON = Transcript("Goal: go to the red ball.", (("Action: go forward", "You completed the goal."),))
LOST = Transcript("Goal: go to the red ball.", (("Action: turn left", "You ran out of steps."),))


def scripted_server(log_dir: Path) -> LocalJudgeServer:
    port = free_port()
    argv = [sys.executable, "-m", "uvicorn", "--app-dir", str(TESTS), "scripted_judge:app"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    spec = ChildSpec("judge-0", "judge", argv, shlex.join(argv), health_port=port)
    return LocalJudgeServer(spec, log_dir, port)


def test_a_judge_server_killed_mid_group_is_restarted_and_the_group_judged(
    tmp_path: Path,
) -> None:
    server = scripted_server(tmp_path)

    async def main() -> list[float]:
        await server.start()
        endpoint = ChatEndpoint(server.url, "oracle-slow1", retries=0, backoff_s=0.01)
        judge = Judge(RestartingEndpoint(server, endpoint))
        try:
            judging = asyncio.create_task(judge.judge([WON, LOST, WON]))
            await asyncio.sleep(0.5)  # the requests are open
            server.child.kill_group()
            verdicts = await judging
            again = await judge.judge([LOST])  # the restarted server goes on serving
            return [v.score for v in [*verdicts, *again] if v is not None]
        finally:
            await endpoint.aclose()

    try:
        scores = asyncio.run(main())
    finally:
        server.stop()
    assert scores == [1.0, 0.0, 1.0, 0.0]
    assert server.restarts == 1
    starts = [line for line in server.child.log_path.read_text().splitlines() if "start:" in line]
    assert len(starts) == 2 and "scripted_judge:app" in starts[0]
    assert not server.running()
