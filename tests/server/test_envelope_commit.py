"""A forwarded write is answered only once committed, and a failed commit reaches the broker
as the envelope's own NOT_CONTROLLER (so it looks for the new controller), as Kafka does.

The router runs in-process with a committer whose commits the test completes or fails.
"""

from __future__ import annotations

import asyncio

from protocol.error_codes import Error
from protocol.generated.messages import ApiKey
from protocol.generated.metadata.feature_level_record import FeatureLevelRecord
from server.apis import Router
from server.context import Principal, RequestContext
from server.controller.clock import ManualClock
from server.controller.features import MV_LATEST
from server.controller.quorum_controller import QuorumController
from server.controller.result import ControllerResult
from tests.support.kafka_python_wire import decode_response, encode_request, kp
from tests.support.envelope import create_topics, envelope

FRAME_SIZE = 4


class HeldCommitter:
    """Commits nothing until the test says how each one ends."""

    committed_offset = -1

    @property
    def commits(self) -> "HeldCommitter":
        """Its own progress: how far it committed, and the waits."""
        return self

    def __init__(self) -> None:
        self.waiters: list[asyncio.Future] = []

    def submit(self, records, base_offset: int) -> None:
        pass

    def wait(self, offset: int) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self.waiters.append(fut)
        return fut


class Client:
    context = RequestContext(Principal("User", "broker-1"), "127.0.0.1")
    sasl = None  # a listener without SASL


def forwarded_create(outcome: BaseException | None):
    async def run():
        qc = QuorumController("cluster", 1, ManualClock())
        qc.apply(ControllerResult([(FeatureLevelRecord(name="metadata.version", feature_level=MV_LATEST), 0)]))
        committer = HeldCommitter()
        router = Router(lambda: qc, committer)
        contexts = []
        create = router.handlers[ApiKey.CREATE_TOPICS]

        def seen(request, version, context, conn):
            contexts.append(context)
            return create(request, version, context, conn)
        router.register(ApiKey.CREATE_TOPICS, seen)
        wrapped = envelope(encode_request(create_topics("held"), 5))
        pending = router.dispatch(Client(), encode_request(wrapped, 6))
        assert isinstance(pending, asyncio.Future)
        # The inner request was handled as the client's, with the broker kept beside it.
        assert contexts == [RequestContext(Principal("User", "alice"), "127.0.0.1",
                                           forwarded_by=Client.context.principal)]
        await asyncio.sleep(0)
        assert not pending.done(), "answered before the commit"
        [waiter] = committer.waiters
        if outcome is None:
            waiter.set_result(None)
        else:
            waiter.set_exception(outcome)
        return decode_response("EnvelopeResponse", 0, (await pending)[FRAME_SIZE:])
    return asyncio.run(run())


def test_the_inner_answer_is_released_by_the_commit():
    answer = forwarded_create(None)
    assert (answer.header.correlation_id, answer.error_code) == (6, Error.NONE)
    inner = decode_response("CreateTopicsResponse", 7, answer.response_data)
    assert inner.header.correlation_id == 5
    # No broker is registered, so the topic cannot be placed; what matters is the wrapping.
    assert [t.name for t in inner.topics] == ["held"]


def test_a_failed_commit_is_the_envelopes_not_controller():
    answer = forwarded_create(OSError("the disk is gone"))
    assert (answer.error_code, answer.response_data) == (Error.NOT_CONTROLLER, None)



class Standby:
    """The role of a voter that is not the active controller."""

    active = False


def routed(request, answer_name: str, version: int, role=None, outcome: BaseException | None = None):
    """One request through a router of its own; the commit it waits for (if any) ends with
    ``outcome``. Returns the decoded answer and the controller."""
    async def run():
        qc = QuorumController("cluster", 1, ManualClock())
        qc.apply(ControllerResult([(FeatureLevelRecord(name="metadata.version", feature_level=MV_LATEST), 0)]))
        committer = HeldCommitter()
        router = Router(lambda: qc, committer, role=role)
        pending = router.dispatch(Client(), encode_request(request, 3))
        if isinstance(pending, asyncio.Future):
            await asyncio.sleep(0)
            for waiter in committer.waiters:
                if outcome is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(outcome)
            pending = await pending
        return pending, qc
    frame, qc = asyncio.run(run())
    return decode_response(answer_name, version, frame[FRAME_SIZE:]), qc


def test_a_standby_refuses_a_write_per_item_without_running_it():
    answer, qc = routed(create_topics("refused"), "CreateTopicsResponse", 7, role=Standby())
    assert [(t.name, t.error_code) for t in answer.topics] == [("refused", Error.NOT_CONTROLLER)]
    # Nothing was applied, so nothing had to be taken back.
    assert qc.next_offset == 1 and qc.offsets.pending_undo == 0


def test_a_read_whose_commit_fails_names_no_controller():
    metadata = kp("MetadataRequest")[12](topics=None, allow_auto_topic_creation=False,
                                          include_topic_authorized_operations=False)
    answer, _ = routed(metadata, "MetadataResponse", 12, outcome=OSError("leadership lost"))
    assert answer.controller_id == -1
