"""The Spark job: only what a deployment runs.

The query (`job`: parse, watermark, the per-group step under `applyInPandasWithState` or `transformWithState`),
the Kafka source and sink (`kafka_source`), the file source for replays (`file_source`, `traffic_file`), the live
runner (`live_job`: topics, ticks, query, status), the Spark session, settings, the embedded broker and Kafka
helpers (`broker`), its Prometheus series (`metrics`), and the tools over recorded traffic: `replay`, `record`,
`diff`.

May import the engine (coordinator_state), what the metrics share (coordinator_metrics), pyspark, pyarrow, pandas,
kafka-python, confluent-kafka (the sink's producer) and (in `metrics`) prometheus_client; never the lab
(coordinator_lab), the chaos harness, the gateway, the client library or the CLI. `replay` (local engine),
`record` and `diff` import no pyspark at module level: Spark loads only when a Spark replay runs.
"""
