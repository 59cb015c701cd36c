"""The error-code table: Kafka's numbers, names and retriability."""

from protocol.error_codes import Error, describe, is_retriable, message


def test_numbers_and_names_follow_kafka():
    assert Error.NONE == 0 and Error.UNKNOWN_SERVER_ERROR == -1
    assert Error.NOT_CONTROLLER == 41
    assert Error.STALE_BROKER_EPOCH == 77
    assert Error.DUPLICATE_BROKER_REGISTRATION == 101
    assert Error.INCONSISTENT_CLUSTER_ID == 104
    assert Error.INELIGIBLE_REPLICA == 107
    assert Error.NEW_LEADER_ELECTED == 108
    # No gaps between -1 and the newest code the table knows.
    assert sorted(int(e) for e in Error) == list(range(-1, max(Error) + 1))


def test_retriable_errors_are_the_ones_clients_retry():
    assert is_retriable(Error.NOT_CONTROLLER)
    assert is_retriable(Error.LEADER_NOT_AVAILABLE)
    assert is_retriable(Error.FENCED_LEADER_EPOCH)
    assert not is_retriable(Error.INCONSISTENT_CLUSTER_ID)
    assert not is_retriable(Error.TOPIC_ALREADY_EXISTS)
    assert not is_retriable(Error.NONE)


def test_descriptions():
    assert describe(41) == "NOT_CONTROLLER (41)"
    assert describe(9999) == "UNKNOWN_ERROR_CODE (9999)"
    assert message(Error.NONE) == ""
    assert "controller" in message(Error.NOT_CONTROLLER)
    assert all(message(e) for e in Error if e != Error.NONE)
