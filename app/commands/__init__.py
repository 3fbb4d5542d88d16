"""What a user runs: the CLI, ``verify`` and the first-hour tools (topics, produce, tail, lag)."""
