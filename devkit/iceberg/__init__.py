"""A local Apache Iceberg REST catalog (the project's fixture server) for tests and the dev kit."""
