"""Kafka client wiring: forced settings, client construction, error classification."""
