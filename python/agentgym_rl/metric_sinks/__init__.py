"""A run's scalars as they arrive, for the tools people watch runs in: `scalars` names them (the
names verl and TRL users know) and defines the `MetricSink` the supervisor's watcher feeds;
`tensorboard` and `wandb_run` are the sinks. Plots and summaries of finished runs are `report`'s."""
