"""Development tools that never ship in the service wheel or image.

:mod:`devkit.kafka` starts real local Kafka brokers (tests, bench, docs, ``python -m
devkit.kafka start``); :mod:`devkit.demo` is ``make demo``. Both run from a repository
checkout, where the repository root is on ``sys.path`` (``python -m`` and pytest put it there).
"""
