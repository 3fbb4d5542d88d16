"""What an operator sees: health endpoints, metrics, logs, the progress line and lag."""
