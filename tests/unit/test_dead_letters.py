"""One bad message never stops a consumer: what memcached holds that this farm
did not write, and what no consumer can finish, goes to the queue's dead
letters, and everything behind it flows on. On a real memcached."""

import json
import time

import pytest
from django.core.management import CommandError, call_command

from tests.harness.processes import wait_for
from webfarm.core.client import server_client
from webfarm.queues.entries import BadEntry, decode, encode, with_redeliveries
from webfarm.queues.exceptions import ClaimLost, InvalidReceipt
from webfarm.queues.queue import DeadLetter, Queue


@pytest.fixture
def fast(settings):
    settings.QUEUES = {
        **settings.QUEUES,
        "HOLE_WAIT": 0.2,
        "RECOVER_INTERVAL": 0.0,
        "VISIBILITY_TIMEOUT": 1,
        "MAX_DELIVERIES": 3,
    }


def _plant(queue: Queue, value: bytes) -> int:
    """Write an entry as anyone who can reach memcached could: take an index
    the way a producer does and put `value` there."""
    gen = queue.layout.generation()
    client = server_client(f"q:{queue.name}")
    index = client.incr(f"q:{queue.name}:{gen}:tail", 1)
    client.set(f"q:{queue.name}:{gen}:m:{index}", value)
    return index


def _dead(queue: Queue) -> list[DeadLetter]:
    dead = queue.dead_letters()
    letters = dead.claim_many(100)
    dead.ack_many([m.receipt for m in letters])
    return [DeadLetter.from_json(m.body) for m in letters]


@pytest.mark.parametrize(
    "planted",
    [
        b"M0 1700000000.000 " + b"0" * 32 + b"\n" + b'{"task": "evil"}',  # our format, a made-up MAC
        b"garbage",
        b"",
        b"M0 1e20 " + b"0" * 32 + b"\n",
        b"\x80\x04\x95pickle",
        b"M0 1700000000.000 " + b"x" * 5000,
    ],
    ids=["forged-mac", "garbage", "empty", "huge-time", "pickle", "no-newline"],
)
def test_a_planted_entry_goes_to_the_dead_letters_and_the_rest_flows(fast, planted):
    queue = Queue("planted")
    queue.put(b"before")
    index = _plant(queue, planted)
    queue.put(b"after")
    got = [m.body for m in queue.claim_many(10)]
    assert got == [b"before", b"after"]
    (letter,) = _dead(queue)
    assert letter.index == index and letter.queue == "planted" and letter.body == planted
    assert "farm" in letter.reason or "format" in letter.reason or "MAC" in letter.reason
    stats = queue.stats()
    assert stats["dead"] == 1 and stats["out"] == 2


def test_a_message_copied_from_another_queue_is_refused():
    """A real message of ours, moved: its MAC names the queue it was put in."""
    other = Queue("votes-elsewhere")
    other.put(b'{"choice": 1}')
    gen = other.layout.generation()
    raw = server_client("q:votes-elsewhere").get(f"q:votes-elsewhere:{gen}:m:1")
    target = Queue("copied-into")
    _plant(target, raw)
    assert target.claim_many(5) == []
    (letter,) = _dead(target)
    assert "MAC" in letter.reason


def test_a_message_no_consumer_finishes_goes_to_the_dead_letters_after_max_deliveries(fast):
    queue = Queue("poison")
    queue.put_many([b"poison", b"fine"])
    deliveries = []

    def consume_once() -> bool:
        for message in queue.claim_many(5):
            if message.body == b"poison":
                deliveries.append(message.redeliveries)  # the consumer crashes on it: no ack
            else:
                queue.ack(message.receipt)
        return bool(_dead_waiting(queue))

    wait_for(consume_once, timeout=20, interval=0.1, what="the poison message to be buried")
    assert deliveries == [0, 1, 2]  # MAX_DELIVERIES = 3, then the dead letters
    (letter,) = _dead(queue)
    assert (
        letter.body == b"poison" and letter.deliveries == 3 and "without being acknowledged" in letter.reason
    )
    assert queue.claim_many(5) == []


def _dead_waiting(queue: Queue) -> int:
    return queue.stats()["dead_letters"]


def test_rejecting_a_message_over_and_over_buries_it(fast):
    queue = Queue("rejected")
    queue.put(b"never right")
    for _ in range(2):
        assert queue.reject(queue.claim().receipt) is not None
    assert queue.reject(queue.claim().receipt) is None  # the third rejection buries it
    assert queue.claim() is None
    (letter,) = _dead(queue)
    assert letter.body == b"never right" and letter.deliveries == 3


def test_a_consumer_buries_what_it_cannot_process_and_its_neighbours_are_acked():
    queue = Queue("consumer")
    queue.put_many([b"1", b"[]", b"3"])
    messages = queue.claim_many(3)
    queue.bury(messages[1], "not a number")
    queue.ack_many([messages[0].receipt, messages[2].receipt])
    (letter,) = _dead(queue)
    assert (letter.body, letter.reason, letter.deliveries) == (b"[]", "not a number", 1)
    assert queue.stats()["acked"] == 2


def test_a_forged_receipt_is_refused_and_the_message_stays_claimed(fast):
    queue = Queue("forged")
    queue.put(b"mine")
    message = queue.claim()
    gen, index, version, token = message.receipt.split(".")
    forged = f"{gen}.{index}.{version}.{'0' * 48}"
    one_off = token[:-1] + ("1" if token[-1] == "0" else "0")
    others = (f"{gen}.{index}.{version}.{one_off}", f"{gen}.{int(index) + 1}.{version}.{token}")
    for receipt in (forged, *others, f"{gen}.{index}.{int(version) + 1}.{token}"):
        with pytest.raises(InvalidReceipt):
            queue.ack(receipt)
        with pytest.raises(InvalidReceipt):
            queue.reject(receipt)
        with pytest.raises(InvalidReceipt):
            queue.extend([receipt])
    client = server_client("q:forged")
    assert client.get(f"q:forged:{gen}:c:{index}") is not None  # still claimed, by its holder
    assert client.get(f"q:forged:{gen}:m:{index}").startswith(b"M")  # not acked
    queue.ack(message.receipt)
    assert queue.stats()["acked"] == 1


def test_an_ack_for_a_claim_someone_else_holds_now_is_refused(fast):
    queue = Queue("taken-over")
    queue.put(b"slow work")
    first = queue.claim()
    # Its claim lapses; another consumer gets the message again.
    second = wait_for(lambda: Queue("taken-over").claim(), timeout=10, interval=0.1, what="redelivery")
    assert second.redelivered and second.index == first.index
    with pytest.raises(ClaimLost):
        queue.ack(first.receipt)
    Queue("taken-over").ack(second.receipt)
    assert queue.stats()["acked"] == 1


def test_a_late_ack_nobody_took_over_still_counts(fast):
    queue = Queue("late")
    queue.put(b"done, slowly")
    message = queue.claim()
    time.sleep(1.2)  # its claim expires (VISIBILITY_TIMEOUT 1) and nobody claims it again
    queue.ack(message.receipt)
    assert Queue("late").claim_many(5) == [] and queue.stats()["acked"] == 1


def test_dead_letters_are_shown_requeued_and_purged_by_command(fast, capsys):
    queue = Queue("ops")
    queue.put(b"keep me")
    queue.bury(queue.claim(), "the consumer could not parse it")
    call_command("dead_letters", "ops")
    shown = capsys.readouterr().out
    assert "the consumer could not parse it" in shown and "keep me" in shown
    assert _dead_waiting(queue) == 1  # looking takes nothing away
    call_command("dead_letters", "ops", "--requeue")
    assert queue.claim().body == b"keep me"
    queue.put(b"drop me")
    queue.bury(queue.claim_many(5)[-1], "no good")
    call_command("dead_letters", "ops", "--purge")
    assert _dead_waiting(queue) == 0


def test_the_command_sees_the_memcached_brokers_dead_letters(fast, settings, capsys, memcached_server):
    """Celery's queues on the memcached broker live under a namespace of their
    own: `dead_letters celery` (or broker:<name>) looks there."""
    from webfarm.broker.transport import broker_ring

    settings.CELERY_BROKER_URL = f"memcached://{memcached_server}"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"servers": [memcached_server]}
    broker = Queue("celery", ring=broker_ring())
    broker.put(b'{"task": "x"}')
    broker.bury(broker.claim(), "a task nobody knows")
    Queue("celery").put(b"the farm's own queue of that name holds nothing dead")
    for name in ("celery", "broker:celery"):
        call_command("dead_letters", name)
        shown = capsys.readouterr().out
        assert shown.startswith("1 dead letters of celery") and "a task nobody knows" in shown, shown
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    with pytest.raises(CommandError, match="not memcached"):
        call_command("dead_letters", "broker:celery")


def test_the_command_says_what_it_cannot_read_and_why(fast, settings, capsys):
    """Dead letters written with another DJANGO_SECRET_KEY (a farm started with
    its own key, a command run without it) are counted, not silently left out."""
    queue = Queue("otherkey")
    queue.put(b"sealed with the farm's key")
    queue.bury(queue.claim(), "no good")
    settings.SECRET_KEY = "another-key-" + "k" * 40
    with pytest.raises(CommandError, match=r"1 dead letters of otherkey cannot be read.*DJANGO_SECRET_KEY"):
        call_command("dead_letters", "otherkey")
    assert capsys.readouterr().out.startswith("1 dead letters of otherkey")


def test_a_queue_nobody_used_is_named_as_unknown_and_not_created(fast):
    """A typo, or a command pointed at another memcached or namespace, is said
    as such, with the queues that are known; looking does not create it."""
    Queue("orders").put(b"known")
    with pytest.raises(
        CommandError, match=r"no queue 'ordres' has been used on memcached .* Known queues: orders"
    ):
        call_command("dead_letters", "ordres")
    assert not Queue("ordres").exists()


def test_a_put_from_a_reserve_onto_a_planted_tail_is_not_lost(fast):
    """A busy producer puts from indexes it reserved a moment earlier, without
    an incr: when the tail was overwritten meanwhile, consumers move to a new
    generation, and so must its message (it was lost there once: the trust
    test's report task)."""
    producer = Queue("reserved")
    for n in range(4):  # busy: it reserves its next indexes as it puts
        producer.put(b"warm %d" % n)
    consumer = Queue("reserved")
    assert [consumer.claim().body for _ in range(4)] == [b"warm %d" % n for n in range(4)]
    gen = producer.layout.generation()
    server_client("q:reserved").set(f"q:reserved:{gen}:tail", b"not-a-number")
    producer.put(b"after the plant")
    wait_for(
        lambda: (m := Queue("reserved").claim()) and m.body == b"after the plant",
        timeout=10,
        what="the message put after the plant",
    )


def test_a_planted_queue_counter_starts_a_new_generation_rather_than_stalling(fast):
    queue = Queue("counters")
    queue.put(b"one")
    gen = queue.layout.generation()
    server_client("q:counters").set(f"q:counters:{gen}:tail", b"not-a-number")
    assert queue.put(b"two") >= 1  # a fresh generation
    assert Queue("counters").claim().body == b"two"
    server_client("q:counters").set("q:counters:gen", b"bad gen!")
    assert Queue("counters").put(b"three") >= 1
    assert Queue("counters").claim().body == b"three"


def test_the_redelivery_count_is_outside_the_mac_and_nothing_else_is():
    body = json.dumps({"x": 1}).encode()
    here = {"gen": "0123abcd", "index": 7, "enqueued_at": 1.0}
    raw = encode("q:a", body, redeliveries=2, **here)
    assert raw.startswith(b"M2 ")
    assert decode("q:a", with_redeliveries(raw, 4), "0123abcd", 7).redeliveries == 4

    def tag(**place) -> bytes:
        return encode(place.pop("queue", "q:a"), body, **{**here, **place}).split(b" ")[2]

    assert len({tag(), tag(queue="q:b"), tag(index=8), tag(gen="0123abce"), tag(enqueued_at=2.0)}) == 5
    for elsewhere in (("q:b", "0123abcd", 7), ("q:a", "0123abcd", 8), ("q:a", "ffffffff", 7)):
        with pytest.raises(BadEntry):
            decode(elsewhere[0], raw, elsewhere[1], elsewhere[2])


def test_an_entry_copied_to_another_index_is_not_delivered_again(settings):
    """Someone who can reach memcached copies a real Celery task (or vote) to
    the next index: its MAC names the index it was written at, so the copy
    goes to the dead letters and the message is delivered once."""
    queue = Queue("replayed")
    first = queue.put(b"run me once")
    gen = queue.layout.generation()
    client = server_client("q:replayed")
    original = client.get(f"q:replayed:{gen}:m:{first}")
    second = queue.put(b"a placeholder the copy replaces")
    client.set(f"q:replayed:{gen}:m:{second}", original)
    consumer = Queue("replayed")
    got = consumer.claim()
    assert got.body == b"run me once"
    consumer.ack(got.receipt)
    assert consumer.claim() is None
    assert consumer.stats()["dead_letters"] == 1
