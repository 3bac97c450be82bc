"""Which Kafka APIs the gateway serves, and the message classes of those whose bodies it reads or writes.

The message classes come from kafka-python 3.x's `kafka.protocol`, which builds every request and
response version from Kafka's JSON message specs; this module only indexes them by API key.

- GROUP_APIS (PROTOCOL.md sections 2, 8 and 11) become envelopes for the coordinator, at the contract's
  versions, whatever port they come in on: they never go upstream;
- PROXIED_APIS go to the upstream node of the connection's port; those whose answers carry broker
  addresses (Metadata, DescribeCluster, a transactional FindCoordinator) come back rewritten by the
  port-mapping unit;
- the units of a connection's chain answer some APIs themselves (ApiVersions, a group's FindCoordinator,
  and what the security units add);
- anything else (KIP-848, share and streams groups, the group-coordinator APIs this coordinator does
  not implement such as TxnOffsetCommit, broker-to-broker APIs) is not advertised, and a
  request for it closes the connection, as a Kafka broker closes a connection that sends an API it does
  not serve.
"""

from __future__ import annotations

from typing import Any, Final

from kafka.protocol.admin import cluster, groups, topics
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import fetch, offsets
from kafka.protocol.consumer import group as consumer_group
from kafka.protocol.metadata import api_versions, find_coordinator, metadata
from kafka.protocol.producer import produce
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from coordinator_state import SUPPORTED_VERSIONS

# The coordinator's APIs at the versions the contract supports (PROTOCOL.md 2, 8 and 11): the engine's own table,
# whose API names are Kafka's.
GROUP_APIS: Final[dict[ApiKey, tuple[int, int]]] = {
    ApiKey[api]: versions for api, versions in SUPPORTED_VERSIONS.items()}

# Client-facing APIs forwarded to the upstream node of the connection's port.
PROXIED_APIS: Final[frozenset[ApiKey]] = frozenset({
    ApiKey.Produce, ApiKey.Fetch, ApiKey.ListOffsets, ApiKey.CreateTopics, ApiKey.DeleteTopics,
    ApiKey.DeleteRecords, ApiKey.InitProducerId, ApiKey.OffsetForLeaderEpoch, ApiKey.AddPartitionsToTxn,
    ApiKey.EndTxn, ApiKey.DescribeAcls, ApiKey.CreateAcls, ApiKey.DeleteAcls, ApiKey.DescribeConfigs,
    ApiKey.AlterConfigs, ApiKey.DescribeLogDirs, ApiKey.CreatePartitions, ApiKey.ElectLeaders,
    ApiKey.IncrementalAlterConfigs, ApiKey.AlterPartitionReassignments, ApiKey.ListPartitionReassignments,
    ApiKey.DescribeClientQuotas, ApiKey.AlterClientQuotas, ApiKey.DescribeUserScramCredentials,
    ApiKey.AlterUserScramCredentials, ApiKey.DescribeProducers, ApiKey.DescribeTransactions,
    ApiKey.ListTransactions, ApiKey.DescribeTopicPartitions, ApiKey.Metadata, ApiKey.DescribeCluster,
})

# The message classes of the APIs whose bodies the gateway or a unit reads or writes (their advertised
# versions are capped at what the codec knows). Other proxied requests are forwarded as they are; a
# Produce is read for its acks, which say whether an answer will come.
MESSAGE_CLASSES: Final[dict[ApiKey, tuple[Any, Any]]] = {
    ApiKey.Produce: (produce.ProduceRequest, produce.ProduceResponse),
    ApiKey.Metadata: (metadata.MetadataRequest, metadata.MetadataResponse),
    ApiKey.DescribeCluster: (cluster.DescribeClusterRequest, cluster.DescribeClusterResponse),
    ApiKey.ApiVersions: (api_versions.ApiVersionsRequest, api_versions.ApiVersionsResponse),
    ApiKey.FindCoordinator: (find_coordinator.FindCoordinatorRequest, find_coordinator.FindCoordinatorResponse),
    ApiKey.JoinGroup: (consumer_group.JoinGroupRequest, consumer_group.JoinGroupResponse),
    ApiKey.SyncGroup: (consumer_group.SyncGroupRequest, consumer_group.SyncGroupResponse),
    ApiKey.Heartbeat: (consumer_group.HeartbeatRequest, consumer_group.HeartbeatResponse),
    ApiKey.LeaveGroup: (consumer_group.LeaveGroupRequest, consumer_group.LeaveGroupResponse),
    ApiKey.OffsetCommit: (consumer_group.OffsetCommitRequest, consumer_group.OffsetCommitResponse),
    ApiKey.OffsetFetch: (consumer_group.OffsetFetchRequest, consumer_group.OffsetFetchResponse),
    ApiKey.DescribeGroups: (groups.DescribeGroupsRequest, groups.DescribeGroupsResponse),
    ApiKey.ListGroups: (groups.ListGroupsRequest, groups.ListGroupsResponse),
    ApiKey.DeleteGroups: (groups.DeleteGroupsRequest, groups.DeleteGroupsResponse),
    ApiKey.OffsetDelete: (consumer_group.OffsetDeleteRequest, consumer_group.OffsetDeleteResponse),
    # Read by the security units: the SASL login, and the APIs authorized per topic.
    ApiKey.SaslHandshake: (SaslHandshakeRequest, SaslHandshakeResponse),
    ApiKey.SaslAuthenticate: (SaslAuthenticateRequest, SaslAuthenticateResponse),
    ApiKey.Fetch: (fetch.FetchRequest, fetch.FetchResponse),
    ApiKey.ListOffsets: (offsets.ListOffsetsRequest, offsets.ListOffsetsResponse),
    ApiKey.OffsetForLeaderEpoch: (offsets.OffsetForLeaderEpochRequest, offsets.OffsetForLeaderEpochResponse),
    ApiKey.CreateTopics: (topics.CreateTopicsRequest, topics.CreateTopicsResponse),
    ApiKey.DeleteTopics: (topics.DeleteTopicsRequest, topics.DeleteTopicsResponse),
}


def request_class(api_key: ApiKey) -> Any:
    """The request message class of an API whose body the gateway decodes."""
    return MESSAGE_CLASSES[api_key][0]


def response_class(api_key: ApiKey) -> Any:
    """The response message class of an API whose answer the gateway encodes or rewrites."""
    return MESSAGE_CLASSES[api_key][1]
