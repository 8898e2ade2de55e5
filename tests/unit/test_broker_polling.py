"""How the memcached broker's worker polls: hot right after a delivery, then
backing off to polling_interval. Pure logic: the cycle is a stand-in."""

from queue import Empty
from types import SimpleNamespace

import pytest

from webfarm.broker import transport
from webfarm.broker.transport import HOT_POLL, MIN_POLL, Transport


class Cycle:
    """Delivers on the polls named, empty on the others."""

    def __init__(self, deliver_on: set[int]) -> None:
        self.deliver_on = deliver_on
        self.polls = 0

    def get(self, callback, timeout=None):
        self.polls += 1
        if self.polls not in self.deliver_on:
            raise Empty()


@pytest.fixture
def clock(monkeypatch):
    """A clock that moves only when the poller sleeps; the pauses slept.
    The transport's own `time` is replaced, not the time module: the
    process's other threads keep sleeping on the real one."""
    state = SimpleNamespace(now=1000.0, pauses=[])

    def sleep(seconds):
        state.pauses.append(seconds)
        state.now += seconds

    monkeypatch.setattr(transport, "time", SimpleNamespace(monotonic=lambda: state.now, sleep=sleep))
    return state


def poller(cycle, delivered_at):
    return SimpleNamespace(cycle=cycle, _deliver=None, polling_interval=0.05, _delivered_at=delivered_at)


def test_polls_stay_hot_after_a_delivery_then_back_off(clock):
    # A delivery just now: the next polls are MIN_POLL apart for HOT_POLL.
    cycle = Cycle(deliver_on=set())
    with pytest.raises(TimeoutError):
        Transport.drain_events(poller(cycle, delivered_at=clock.now), None, timeout=0.5)
    hot = [p for p in clock.pauses if p == MIN_POLL]
    assert len(hot) >= int(HOT_POLL / MIN_POLL) - 1
    assert clock.pauses[: len(hot)] == hot, "a backed-off pause came inside the hot window"
    assert max(clock.pauses) == 0.05, "never backed off to polling_interval"


def test_an_idle_worker_backs_off_at_once(clock):
    cycle = Cycle(deliver_on=set())
    with pytest.raises(TimeoutError):
        Transport.drain_events(poller(cycle, delivered_at=clock.now - 60), None, timeout=0.5)
    assert clock.pauses[0] == MIN_POLL and clock.pauses[1] > MIN_POLL
    # Backing off, an idle worker polls memcached a few dozen times in half a second.
    assert cycle.polls < 30


def test_a_delivery_returns_and_is_remembered(clock):
    cycle = Cycle(deliver_on={3})
    state = poller(cycle, delivered_at=clock.now - 60)
    Transport.drain_events(state, None, timeout=1)
    assert cycle.polls == 3
    assert state._delivered_at == clock.now
