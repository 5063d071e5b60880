"""The sites the WebArena task set serves on 127.0.0.1: a shop (`shop.py`) and a forum
(`forum.py`), Starlette apps over generated data (`data.py`) with per-session state
(`state.py`), run by `server.py` on a thread of their own."""
