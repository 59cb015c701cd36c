"""The follower lag model: seeded, independent per follower, and blind to polling frequency."""

from __future__ import annotations

import pytest

from tools.broker.lag import LagModel

TOPIC = bytes(range(16))


def story(model: LagModel, key, times, eligible=lambda t: True, in_isr=True) -> list[bool]:
    return [model.in_sync(key, t, eligible(t), in_isr) for t in times]


def test_the_same_seed_tells_the_same_story():
    times = [i * 0.5 for i in range(400)]
    a = story(LagModel(7, 10.0, 2.0), (TOPIC, 0, 3), times)
    b = story(LagModel(7, 10.0, 2.0), (TOPIC, 0, 3), times)
    c = story(LagModel(8, 10.0, 2.0), (TOPIC, 0, 3), times)
    assert a == b
    assert a != c
    assert True in a and False in a  # it both falls behind and catches up over 200 s


def test_a_follower_does_not_depend_on_how_often_it_is_asked():
    coarse = LagModel(3, 5.0, 1.0)
    fine = LagModel(3, 5.0, 1.0)
    key = (TOPIC, 1, 2)
    fine_answers = {round(i * 0.1, 1): fine.in_sync(key, i * 0.1, True, True) for i in range(1000)}
    for t in range(100):
        assert coarse.in_sync(key, float(t), True, True) == fine_answers[float(t)]


def test_followers_are_independent_of_each_other():
    alone = LagModel(5, 4.0, 1.0)
    crowded = LagModel(5, 4.0, 1.0)
    times = [i * 0.25 for i in range(200)]
    for t in times:
        crowded.in_sync((TOPIC, 9, 9), t, True, True)  # another follower drawing in between
    assert story(alone, (TOPIC, 0, 1), times) == story(crowded, (TOPIC, 0, 1), times)


def test_an_ineligible_follower_never_catches_up_and_starts_its_clock_when_eligible():
    model = LagModel(1, 0.0, 1.0)
    key = (TOPIC, 0, 4)
    assert story(model, key, [0.0, 10.0, 100.0], eligible=lambda t: False) == [False] * 3
    # Eligible from t=100: behind at first, caught up within a few mean catch-up times.
    answers = story(model, key, [100 + i * 0.1 for i in range(300)])
    assert answers[0] is False
    assert answers[-1] is True
    assert answers.index(True) > 0


def test_with_no_mean_in_sync_time_a_follower_never_falls_behind_by_itself():
    model = LagModel(2, 0.0, 0.5)
    assert story(model, (TOPIC, 0, 1), [i * 10.0 for i in range(100)]) == [True] * 100


def test_a_follower_first_seen_outside_the_isr_starts_behind():
    model = LagModel(2, 0.0, 3.0)
    assert model.in_sync((TOPIC, 0, 1), 0.0, True, in_isr=False) is False


def test_retain_forgets_followers_no_longer_led_here():
    model = LagModel(2, 0.0, 3.0)
    model.in_sync((TOPIC, 0, 1), 0.0, True, in_isr=True)
    model.in_sync((TOPIC, 0, 2), 0.0, True, in_isr=True)
    model.retain({(TOPIC, 0, 2)})
    # Forgotten: seen anew, it starts where the ISR says.
    assert model.in_sync((TOPIC, 0, 1), 1.0, True, in_isr=False) is False
    assert model.in_sync((TOPIC, 0, 2), 1.0, True, in_isr=False) is True


def test_negative_means_are_refused():
    with pytest.raises(ValueError):
        LagModel(0, -1.0, 1.0)
