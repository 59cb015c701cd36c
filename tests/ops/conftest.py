"""The operations tests use the test-broker processes of tests/broker."""

from tests.broker.conftest import broker_factory  # noqa: F401  (a fixture, used by name)
