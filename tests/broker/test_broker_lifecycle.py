"""One broker's lifecycle state machine, without I/O: every heartbeat answer it can get."""

from __future__ import annotations

from protocol.error_codes import Error
from tools.broker.lifecycle import Action, Lifecycle, State


def lifecycle() -> tuple[Lifecycle, list[tuple[str, str, str]]]:
    seen: list[tuple[str, str, str]] = []
    return Lifecycle(7, lambda b, old, new, why: seen.append((old.value, new.value, why))), seen


def active(epoch: int = 40) -> tuple[Lifecycle, list]:
    lc, seen = lifecycle()
    lc.registered(epoch, -1)
    assert lc.on_heartbeat(Error.NONE, False, False, epoch) is Action.HEARTBEAT
    return lc, seen


def test_initial_fenced_active_each_logged_once():
    lc, seen = lifecycle()
    assert lc.state is State.INITIAL and not lc.can_lead
    lc.registered(40, 12)
    assert lc.state is State.FENCED and lc.epoch == 40
    # Not yet caught up with its own registration: it asks to stay fenced.
    assert lc.heartbeat_request(39) == (True, False)
    assert lc.on_heartbeat(Error.NONE, True, False, 39) is Action.HEARTBEAT
    assert lc.heartbeat_request(40) == (False, False)
    assert lc.on_heartbeat(Error.NONE, False, False, 40) is Action.HEARTBEAT
    assert lc.on_heartbeat(Error.NONE, False, False, 41) is Action.HEARTBEAT
    assert lc.state is State.ACTIVE and lc.can_lead
    assert [(a, b) for a, b, _ in seen] == [("INITIAL", "FENCED"), ("FENCED", "ACTIVE")]
    assert "broker epoch 40 after a clean shutdown at epoch 12" in seen[0][2]
    assert "metadata offset 40" in seen[1][2]


def test_an_active_broker_follows_fencing_and_comes_back():
    lc, seen = active()
    assert lc.on_heartbeat(Error.NONE, True, False, 50) is Action.HEARTBEAT
    assert lc.state is State.FENCED and not lc.can_lead
    lc.on_heartbeat(Error.NONE, False, False, 51)
    lc.fenced_in_metadata(60)
    assert lc.state is State.FENCED
    lc.fenced_in_metadata(61)  # already fenced: nothing new to report
    lc.on_heartbeat(Error.NONE, False, False, 62)
    assert [(a, b) for a, b, _ in seen[2:]] == [
        ("ACTIVE", "FENCED"), ("FENCED", "ACTIVE"), ("ACTIVE", "FENCED"), ("FENCED", "ACTIVE")]
    assert "metadata offset 60" in seen[4][2]


def test_errors_that_are_not_about_the_registration_change_nothing():
    lc, seen = active()
    for code in (Error.UNKNOWN_SERVER_ERROR, Error.REQUEST_TIMED_OUT):
        assert lc.on_heartbeat(code, True, True, 50) is Action.HEARTBEAT
    assert lc.state is State.ACTIVE and len(seen) == 2


def test_a_lost_registration_means_registering_again():
    for code in (Error.STALE_BROKER_EPOCH, Error.BROKER_ID_NOT_REGISTERED):
        lc, seen = active()
        assert lc.on_heartbeat(code, True, False, 50) is Action.REGISTER
        assert lc.state is State.FENCED
        assert Error(code).name in seen[-1][2]
        lc.registered(77, -1)
        assert lc.epoch == 77 and lc.state is State.FENCED


def test_controlled_shutdown():
    lc, seen = active()
    assert lc.request_shutdown() is Action.HEARTBEAT
    assert lc.state is State.PENDING_SHUTDOWN and lc.can_lead  # it leads until moved away
    assert lc.heartbeat_request(50) == (False, True)
    assert lc.on_heartbeat(Error.NONE, False, False, 50) is Action.HEARTBEAT
    assert lc.state is State.PENDING_SHUTDOWN
    assert lc.on_heartbeat(Error.NONE, True, True, 55) is Action.STOP
    assert lc.state is State.SHUTDOWN and lc.clean_shutdown
    assert [(a, b) for a, b, _ in seen[2:]] == [("ACTIVE", "PENDING_SHUTDOWN"), ("PENDING_SHUTDOWN", "SHUTDOWN")]


def test_shutdown_while_fenced_and_before_registering():
    lc, _ = lifecycle()
    lc.registered(40, -1)
    lc.request_shutdown()
    assert lc.state is State.PENDING_SHUTDOWN
    early, seen = lifecycle()
    assert early.request_shutdown() is Action.STOP
    assert early.state is State.SHUTDOWN and not early.clean_shutdown
    assert seen == [("INITIAL", "SHUTDOWN", "shutdown requested before registration")]


def test_a_shutdown_asked_for_while_registering_again_goes_on_with_the_new_epoch():
    lc, seen = active()
    assert lc.on_heartbeat(Error.STALE_BROKER_EPOCH, True, False, 50) is Action.REGISTER
    lc.request_shutdown()
    lc.registered(77, -1)
    assert (lc.state, lc.epoch) == (State.PENDING_SHUTDOWN, 77)
    assert [(a, b) for a, b, _ in seen[2:]] == [("ACTIVE", "FENCED"), ("FENCED", "PENDING_SHUTDOWN")]


def test_losing_the_registration_during_controlled_shutdown_ends_it_uncleanly():
    lc, _ = active()
    lc.request_shutdown()
    assert lc.on_heartbeat(Error.STALE_BROKER_EPOCH, True, False, 50) is Action.STOP
    assert lc.state is State.SHUTDOWN and not lc.clean_shutdown


def test_abandon():
    lc, seen = active()
    lc.request_shutdown()
    lc.abandon("controlled shutdown did not complete")
    assert lc.state is State.SHUTDOWN and not lc.clean_shutdown
    assert seen[-1] == ("PENDING_SHUTDOWN", "SHUTDOWN", "controlled shutdown did not complete")
