"""The Kafka wire gateway: unmodified Kafka clients talk to the coordinator through it.

`gateway.Gateway` is the protocol core, sans I/O (frames, the kafka-python 3.x codec, envelopes for the group
APIs, per-connection order); `server` and `runner` are the asyncio shell, `coordinators` what answers the
envelopes (the in-process `LocalCoordinator`, or the job's request and response topics), `cli` the
`coordinator gateway` command.

May import the engine (coordinator_state) and kafka-python; never the job (coordinator_job), the client
library, the chaos harness, the lab (coordinator_lab) or the CLI.
"""
