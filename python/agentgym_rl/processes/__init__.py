"""Child processes, one toolkit: `ports` picks free ports, `child` describes (`ChildSpec`,
`cli_spec`), starts, waits for (`wait_ready`) and stops (`Child`) a child process. Used by
`train`'s supervisor, `eval`'s env servers, the soak, chaos and compare harnesses, the cluster
launchers and the agent endpoint."""
