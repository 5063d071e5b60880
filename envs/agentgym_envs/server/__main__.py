"""`python -m agentgym_envs.server NAME [--port P] [--zmq-port Q] ...` (also `agentgym-env-server`)."""

import sys

from agentgym_envs.server.cli import main

sys.exit(main())
