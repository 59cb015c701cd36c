"""kafka-metadata-quorum.sh for kraftwire: the quorum's status and replication as the active
controller reports them (DescribeQuorum), in Kafka's output format."""
