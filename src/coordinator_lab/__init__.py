"""The lab: what measures the coordinator and feeds it traffic, never what a deployment runs.

`bench` (`coordinator bench`: the engine alone) with `bench_spark` and `bench_restart` (the streaming job),
`measuring` (their progress log and Spark's progress reports), `empty_operator` (the benchmark's ceiling: the
job's plan with an operator that does nothing), `gateway_bench` (the gateway with real consumer processes) and
`traffic_gen` (generated traffic: groups joining, syncing, heartbeating).

May import every package but the CLI; the product (coordinator_state, coordinator_job, kafka_gateway,
group_client) never imports it.
"""
