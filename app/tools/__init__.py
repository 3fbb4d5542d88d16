"""First-hour tools on the bridge's own connection settings: topics, produce, tail, lag."""
