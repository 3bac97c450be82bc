"""The Kafka wire gateway: unmodified Kafka clients talk to the coordinator through it.

`gateway.Gateway` is the protocol core, sans I/O (frames, the kafka-python 3.x codec, envelopes for the group
APIs, per-connection order); `server` and `runner` are the asyncio shell, `coordinators` what answers the
envelopes (the in-process `LocalCoordinator`, or the job's request and response topics), `cli` the
`coordinator gateway` command, `metrics` its Prometheus series.

Protocol facts every part respects (Kafka's `SocketServer`, Kroxylicious's filter API):
- a client pipelines requests on a connection and reads the answers in the order it sent them; the
  gateway answers each connection in order and reads its next request only while none is with the
  coordinator (a muted channel), which bounds what one connection holds;
- a client learns broker addresses on one connection and uses them on another (Metadata from any node,
  then Produce to the leader's): no connection may depend on what another was told, so every answer that
  names a broker names it by a rule of its node id alone (`port_mapping`);
- every node is the coordinator of every group, and group requests never go upstream, whatever port they
  come in on.

The gateway as a chain of units (`chain`): each connection gets its own units, built by its port; each
concern is one unit, read and tested alone.
- What a unit gets: at construction, the `ConnectionContext` (connection id, client host, listener name,
  the node id its port stands for, the principal, which an authenticating unit sets); for each request,
  a `Request` (header, bytes as sent, the body decoded on demand); for each answer to an API it names in
  `response_apis`, the request as it passed it on and the answer's body (a dict in the specs' snake_case).
- What a unit returns: for a request, the request (perhaps rewritten with `with_body`) for the next unit,
  or an `Answer` sent back in its place (`close_after` to close once sent); for an answer, the body
  (perhaps rewritten). Raising a `GatewayError` (`CloseConnection`) closes this connection and nothing else.
- What a unit declares: `serves`, the APIs it answers itself (ApiVersions offers them), and `caps`, the
  highest version it lets through of a forwarded API.
Order on a port: the listener's units (TLS is the listener's socket; SASL authentication, then ACL
authorization, plug in here through `runner.ListenerOptions.units`), then `port_mapping.PortMapping`; what
passes them all is routed by the core. Adding a unit touches neither the core nor port mapping.

May import the engine (coordinator_state), kafka-python and what the metrics share (coordinator_metrics; in
`metrics`, prometheus_client); never the job (coordinator_job), the client library, the chaos harness, the lab
(coordinator_lab) or the CLI.
"""
