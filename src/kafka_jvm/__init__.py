"""Apache Kafka 4.4's own JVM programs beside the project: the broker (one KRaft node or three), its admin tools, the
Java consumer and Kafka Streams, built from the Maven project in jvm/. Test and demo tools: the product runs without
them in front of a user's own cluster."""
