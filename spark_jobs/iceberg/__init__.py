"""The Iceberg sink of the Spark jobs: each micro-batch committed once through a catalog.

- :mod:`.settings`: ``output.iceberg`` of the spec and the target it resolves to;
- :mod:`.catalog`: opening the catalog (REST, or the embedded SQLite one), one error mapping;
- :mod:`.sink`: the table's creation and evolution, and the once-per-batch commit.

See docs/spark.md, "Iceberg tables".
"""
