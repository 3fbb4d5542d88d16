"""The sink: what becomes of each output row and dead letter, and the one writer that produces
every record (Kafka Streams' ``RecordCollectorImpl``). Never imports the engine or the
pipeline compiler."""
