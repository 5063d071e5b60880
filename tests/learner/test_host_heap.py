"""The learner's heap bound (`learner/host_heap.py`), in a process of its own (it sets the
process's malloc policy): large blocks freed between live small ones go back to the kernel."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.process

# A step's pattern in miniature: 1.5 MB blocks (activations) between small ones that stay (what
# the step keeps), then the large ones freed. glibc, once a large block was freed, serves the
# rest from its heap, where the small ones pin them.
SCRIPT = """
import json, sys
from agentgym_rl.learner import host_heap

def rss_mb():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) / 1024 for l in f if l.startswith("VmRSS:"))

bounded = host_heap.bound_heap() if sys.argv[1] == "bounded" else False
warm = bytearray(3 << 20); del warm  # glibc's threshold rises past 1.5 MB here, unbounded
before = rss_mb()
large, small = [], []
for _ in range(200):
    large.append(bytearray(3 << 19))
    small.append(bytearray(2048))
held = rss_mb()
del large
print(json.dumps({"bounded": bounded, "grew": held - before, "kept": rss_mb() - before}))
"""


def _run(mode: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_large_blocks_go_back_to_the_kernel_once_freed() -> None:
    plain, bounded = _run("plain"), _run("bounded")
    assert bounded["bounded"] is True
    assert plain["grew"] > 250 and bounded["grew"] > 250  # 200 x 1.5 MB touched either way
    assert plain["kept"] > 0.8 * plain["grew"], plain  # pinned in the heap by the small ones
    assert bounded["kept"] < 0.1 * bounded["grew"], bounded
