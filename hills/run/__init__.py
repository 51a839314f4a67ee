"""One evaluation: the eval pipeline, the runner, the sandbox, the snapshot,
the standby, and what the report measures."""
