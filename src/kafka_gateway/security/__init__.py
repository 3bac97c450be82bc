"""The gateway's security units (PROTOCOL.md section 11), each usable and testable alone:

- `credentials`: SCRAM credentials in Kafka's storage format and the users file (no password is stored);
- `sasl_server`: SaslHandshake and SaslAuthenticate on a client connection (PLAIN, SCRAM-SHA-256/512);
- `sasl_client`: the gateway's own login to the upstream cluster;
- `tls`: the ssl contexts of client listeners and of the upstream connection, and certificate principals;
- `acl`: Kafka's ACL bindings, the ACL file and the authorizer's evaluation rules;
- `authorization`: which ACL each API needs and Kafka's error answer when it is denied;
- `reload`: files re-read when they change.
"""
