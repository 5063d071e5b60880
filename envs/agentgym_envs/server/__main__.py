"""`python -m agentgym_envs.server NAME [--port P] [--zmq-port Q] ...` (needs envs/ on sys.path)."""

import sys

from agentgym_envs.server.options import main

sys.exit(main())
