"""Child processes, one toolkit: `ports` picks free ports, `child` describes (`ChildSpec`,
`cli_spec`), starts, waits for (`wait_ready`) and stops (`Child`) a child process; `orphans`
ends a child at once when its supervisor died; `ownership` (with its `watchdog`) stops whatever
a command started once the command ends, however it ends. Used by `train`'s supervisor, `eval`'s env
servers, the soak, chaos and compare harnesses, the cluster launchers, the agent endpoint, and
the rollout and learner services' stop handlers."""
