"""Workers that read a task file: its input specs, its traced op graph, its profile, a composition check."""
