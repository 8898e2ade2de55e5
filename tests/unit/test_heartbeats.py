"""The process's one heartbeat thread: many jobs' beats, stop waits out a beat
under way, and a forked child starts with nothing of its parent's."""

import os
import threading
import time

import pytest

from tests.harness.processes import wait_for
from webfarm.progress import heartbeats


@pytest.fixture
def beats():
    return heartbeats.Heartbeats()


def test_one_thread_beats_for_every_job(beats):
    counts = {"a": 0, "b": 0}
    threads = set()

    def beat(name):
        def inner():
            counts[name] += 1
            threads.add(threading.current_thread().name)

        return inner

    a = beats.start(0.02, beat("a"))
    b = beats.start(0.05, beat("b"))
    try:
        wait_for(lambda: counts["a"] >= 5 and counts["b"] >= 2, timeout=5, what="both beating")
    finally:
        beats.stop(a)
        beats.stop(b)
    assert threads == {"heartbeats"}
    # The faster beat ran more often: each keeps its own interval.
    assert counts["a"] > counts["b"]


def test_the_first_beat_comes_after_one_interval(beats):
    seen = []
    started = time.monotonic()
    beat_id = beats.start(0.2, lambda: seen.append(time.monotonic() - started))
    try:
        wait_for(lambda: seen, timeout=5, what="a beat")
    finally:
        beats.stop(beat_id)
    assert seen[0] >= 0.2


def test_a_stopped_beat_beats_no_more(beats):
    count = [0]

    def beat():
        count[0] += 1

    beat_id = beats.start(0.01, beat)
    wait_for(lambda: count[0] >= 2, timeout=5, what="two beats")
    beats.stop(beat_id)
    after = count[0]
    # Another job's beats show the thread went on running past the stopped one's due times.
    other = [0]
    other_id = beats.start(0.01, lambda: other.__setitem__(0, other[0] + 1))
    wait_for(lambda: other[0] >= 5, timeout=5, what="the other job's beats")
    beats.stop(other_id)
    assert count[0] == after


def test_stop_waits_for_the_beat_under_way(beats):
    inside, release, done = threading.Event(), threading.Event(), threading.Event()

    def slow_beat():
        inside.set()
        release.wait(5)
        done.set()

    beat_id = beats.start(0.01, slow_beat)
    assert inside.wait(5)
    stopper = threading.Thread(target=beats.stop, args=(beat_id,))
    stopper.start()
    stopper.join(0.2)
    assert stopper.is_alive(), "stop() returned while the beat was still writing"
    release.set()
    stopper.join(5)
    assert not stopper.is_alive() and done.is_set()


def test_a_beat_that_raises_does_not_stop_the_others(beats):
    good = [0]

    def bad():
        raise RuntimeError("memcached said no")

    bad_id = beats.start(0.01, bad)
    good_id = beats.start(0.01, lambda: good.__setitem__(0, good[0] + 1))
    try:
        wait_for(lambda: good[0] >= 5, timeout=5, what="the good beat going on")
    finally:
        beats.stop(bad_id)
        beats.stop(good_id)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_a_forked_child_has_none_of_its_parents_beats():
    parent_beats = [0]
    beat_id = heartbeats.start(0.01, lambda: parent_beats.__setitem__(0, parent_beats[0] + 1))
    try:
        wait_for(lambda: parent_beats[0] >= 1, timeout=5, what="a beat in the parent")
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report what it inherited, then beat on its own
            try:
                state = heartbeats._heartbeats
                inherited = len(state._beats) + len(state._due) + (state._thread is not None)
                beaten = threading.Event()
                child_id = heartbeats.start(0.01, beaten.set)
                ok = beaten.wait(5)
                heartbeats.stop(child_id)
                os.write(write, f"{inherited} {int(ok)}".encode())
            finally:
                os._exit(0)
        os.close(write)
        _, status = os.waitpid(pid, 0)
        answer = os.read(read, 100).decode()
        os.close(read)
    finally:
        heartbeats.stop(beat_id)
    assert status == 0
    assert answer == "0 1", "the child inherited beats, or its own thread never beat"
