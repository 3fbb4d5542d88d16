"""Test support: the Kafka fixture object and small waiting helpers."""
