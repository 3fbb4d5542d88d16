"""Benchmarks: eos-bridge against Quix Streams and hand-written confluent-kafka loops.

Run ``python -m bench`` (or ``make bench``); see :mod:`bench.cli` for the options and
``bench/results/latest.md`` for the last report.
"""
