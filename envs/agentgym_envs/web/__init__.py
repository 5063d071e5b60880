"""Web navigation on real Chromium in WebArena's observation and action format: the browser
core (`env.py`, `browser.py`, `observation.py`, `actions.py`) and its task sets (`taskset.py`
is the contract; `webarena.py` with `sites/`, `miniwob.py`). See README.md."""
