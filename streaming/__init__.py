"""The shell around the engine: the Spark job, the Kafka and file sources and sinks, the CLI."""
