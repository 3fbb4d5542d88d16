"""The engine: the loop, checkpoint, rebalance, transactions, watchdog, the reaction ladder and
the wiring that builds them (Kafka Streams' ``StreamThread``, ``TaskManager``, ``StreamsProducer``).
"""
