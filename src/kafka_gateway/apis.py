"""Which Kafka APIs the gateway answers itself, turns into envelopes, proxies, or refuses.

The message classes come from kafka-python 3.x's `kafka.protocol`, which builds every request and
response version from Kafka's JSON message specs; this module only indexes them by API key.

Theory of operation: every request is routed by its API key alone.
- GROUP_APIS (PROTOCOL.md sections 2 and 8) become envelopes for the coordinator, at the contract's
  versions;
- ApiVersions and FindCoordinator are answered by the gateway itself, and Metadata goes upstream but
  its answer is rewritten so that the gateway is the only broker;
- PROXIED_APIS go to the upstream broker untouched (only the header is read);
- anything else (KIP-848, share and streams groups, the group-coordinator APIs this coordinator does
  not implement such as DeleteGroups or TxnOffsetCommit, SASL, broker-to-broker APIs, DescribeCluster
  whose answer carries broker addresses) is not advertised, and a request for it closes the connection,
  as a Kafka broker closes a connection that sends an API it does not serve.
"""

from __future__ import annotations

from typing import Any, Final

from kafka.protocol.admin import groups
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import group as consumer_group
from kafka.protocol.metadata import api_versions, find_coordinator, metadata
from kafka.protocol.producer import produce

from coordinator_state import SUPPORTED_VERSIONS

# The coordinator's APIs at the versions the contract supports (PROTOCOL.md 2 and 8): the engine's own table,
# whose API names are Kafka's.
GROUP_APIS: Final[dict[ApiKey, tuple[int, int]]] = {
    ApiKey[api]: versions for api, versions in SUPPORTED_VERSIONS.items()}

# Client-facing APIs forwarded to the upstream broker as they are. Their answers carry no broker address.
PROXIED_APIS: Final[frozenset[ApiKey]] = frozenset({
    ApiKey.Produce, ApiKey.Fetch, ApiKey.ListOffsets, ApiKey.CreateTopics, ApiKey.DeleteTopics,
    ApiKey.DeleteRecords, ApiKey.InitProducerId, ApiKey.OffsetForLeaderEpoch, ApiKey.AddPartitionsToTxn,
    ApiKey.EndTxn, ApiKey.DescribeAcls, ApiKey.CreateAcls, ApiKey.DeleteAcls, ApiKey.DescribeConfigs,
    ApiKey.AlterConfigs, ApiKey.DescribeLogDirs, ApiKey.CreatePartitions, ApiKey.ElectLeaders,
    ApiKey.IncrementalAlterConfigs, ApiKey.AlterPartitionReassignments, ApiKey.ListPartitionReassignments,
    ApiKey.DescribeClientQuotas, ApiKey.AlterClientQuotas, ApiKey.DescribeUserScramCredentials,
    ApiKey.AlterUserScramCredentials, ApiKey.DescribeProducers, ApiKey.DescribeTransactions,
    ApiKey.ListTransactions, ApiKey.DescribeTopicPartitions,
})

# Answered by the gateway (ApiVersions, FindCoordinator) or proxied with a rewritten answer (Metadata).
GATEWAY_APIS: Final[frozenset[ApiKey]] = frozenset({ApiKey.ApiVersions, ApiKey.FindCoordinator, ApiKey.Metadata})

# The message classes of the APIs whose bodies the gateway reads or writes. Proxied requests are
# forwarded as they are, except Produce, whose acks say whether an answer will come.
MESSAGE_CLASSES: Final[dict[ApiKey, tuple[Any, Any]]] = {
    ApiKey.Produce: (produce.ProduceRequest, produce.ProduceResponse),
    ApiKey.Metadata: (metadata.MetadataRequest, metadata.MetadataResponse),
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
}


def request_class(api_key: ApiKey) -> Any:
    """The request message class of an API whose body the gateway decodes."""
    return MESSAGE_CLASSES[api_key][0]


def response_class(api_key: ApiKey) -> Any:
    """The response message class of an API whose answer the gateway encodes or rewrites."""
    return MESSAGE_CLASSES[api_key][1]
