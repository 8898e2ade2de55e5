"""The ring while the pool changes (webfarm/core/client/changing.py), on three
real memcached servers: processes of the old ring, followers, leaders and
processes of the new ring, two neighbouring kinds at a time, agree on every
key, and after migrate() the new ring alone finds every value."""

import threading
import time
import uuid

import pytest
from pymemcache.exceptions import MemcacheClientError

from tests.harness import keyspace
from webfarm.core.client import MetaBatch, build_client, changing
from webfarm.core.client.changing import (
    FRESH,
    TOMBSTONE,
    ChangingRing,
    Phase,
    _listing,
    _NoHashWalk,
    clear_tombstones,
    empty,
    is_tombstone,
    migrate,
    tombstone,
)


@pytest.fixture
def rings(three_memcached):
    """Growing from two servers to three: old, new, and each phase between."""
    namespace = f"pc{uuid.uuid4().hex[:8]}"
    old, new = build_client(three_memcached[:2], namespace), build_client(three_memcached, namespace)
    return {
        "old": old,
        "follow": ChangingRing(old, new, Phase.FOLLOW),
        "lead": ChangingRing(old, new, Phase.LEAD),
        "new": new,
    }


def moving_keys(ring: ChangingRing, n: int, prefix: str = "k") -> list[str]:
    keys = [k for k in (f"{prefix}{i}" for i in range(n * 20)) if ring.moving(k)][:n]
    assert len(keys) == n
    return keys


def test_growing_moves_a_third_of_the_keys_and_only_to_the_new_server(rings):
    ring = rings["lead"]
    keys = [f"key{i}" for i in range(3000)]
    moving = [k for k in keys if ring.moving(k)]
    assert 0.25 < len(moving) / len(keys) < 0.42
    added = ring.new.hasher.nodes[-1]
    assert {ring.new.hasher.get_node(k) for k in moving} == {added}


def test_a_follower_and_a_process_of_the_old_ring_count_on_one_server(rings):
    old, follow = rings["old"], rings["follow"]
    key = moving_keys(follow, 1)[0]
    assert follow.incr(key, 1) is None  # nothing yet: the caller adds
    assert old.add(key, b"0")
    for i in range(10):
        (old if i % 2 else follow).incr(key, 1)
    assert old.get(key) == b"10" and follow.get(key) == b"10"
    assert rings["new"].get(key) is None  # nothing went to the new server


def test_a_key_a_leader_makes_lives_on_the_new_server_and_a_follower_finds_it(rings):
    follow, lead, new = rings["follow"], rings["lead"], rings["new"]
    key = moving_keys(lead, 1)[0]
    assert lead.add(key, b"made by a leader", expire=60)
    assert new.get(key) == b"made by a leader"
    assert is_tombstone(rings["old"].get(key))
    assert follow.get(key) == b"made by a leader"
    assert not follow.add(key, b"a follower's") and not lead.add(key, b"a leader's")
    follow.set(key, b"set by a follower")  # follows the tombstone: never over it
    assert new.get(key) == b"set by a follower" and is_tombstone(rings["old"].get(key))


def test_a_follower_and_a_leader_racing_to_add_one_key_make_one_winner(rings):
    follow, lead = rings["follow"], rings["lead"]
    for key in moving_keys(lead, 40, "race"):
        wins = []
        barrier = threading.Barrier(2)

        def take(ring, name, key=key, barrier=barrier, wins=wins):
            barrier.wait()
            if ring.add(key, name.encode(), expire=60):
                wins.append(name)

        threads = [threading.Thread(target=take, args=(r, n)) for r, n in ((follow, "f"), (lead, "l"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(wins) == 1, key
        assert follow.get(key) == lead.get(key) == wins[0].encode()


def test_a_leaders_write_over_an_old_value_moves_it_and_a_stale_cas_loses(rings):
    old, follow, lead, new = rings["old"], rings["follow"], rings["lead"], rings["new"]
    key = moving_keys(lead, 1)[0]
    old.set(key, b"v1", expire=60)
    _, stale = follow.gets(key)
    value, token = lead.gets(key)
    assert value == b"v1" and int(token) % 2 == 0  # issued by the old server
    assert lead.cas(key, b"v2", token, expire=60)
    assert new.get(key) == b"v2" and is_tombstone(old.get(key))
    assert follow.cas(key, b"lost", stale, expire=60) is False
    value, token = follow.gets(key)
    assert value == b"v2" and int(token) % 2 == 1  # by the new one
    assert follow.cas(key, b"v3", token, expire=60)
    assert lead.get(key) == new.get(key) == b"v3"


def test_counting_through_the_whole_change_loses_no_count(rings):
    """Old-ring processes and followers, then followers and leaders with a
    migration under way, then leaders and new-ring processes: every
    increment lands in the one total the new ring reads at the end."""
    old, follow, lead, new = rings["old"], rings["follow"], rings["lead"], rings["new"]
    keys = [*moving_keys(lead, 8, "count"), "steady"]

    def count(pair, times):
        for i in range(times):
            ring = pair[i % 2]
            for key in keys:
                if ring.incr(key, 1) is None and not ring.add(key, b"1"):
                    ring.incr(key, 1)

    count((old, follow), 30)
    threads = [threading.Thread(target=count, args=((follow, lead), 30)) for _ in range(3)]
    for t in threads:
        t.start()
    migrate(lead)
    for t in threads:
        t.join()
    walked = migrate(lead)  # every process leads now: this walk leaves tombstones only
    assert walked.lost_races == 0
    count((lead, new), 30)
    assert {key: new.get(key) for key in keys} == {key: b"150" for key in keys}  # 30 + 3 x 30 + 30


def test_after_the_last_walk_the_new_ring_alone_finds_every_value(rings, three_memcached):
    old, lead, new = rings["old"], rings["lead"], rings["new"]
    keys = [f"item{i}" for i in range(300)]
    for key in keys:
        old.set(key, f"value of {key}".encode(), expire=600)
    walked = migrate(lead)
    assert walked.moved == sum(lead.moving(k) for k in keys)
    assert walked.moved + walked.stayed == len(keys)
    assert all(new.get(key) == f"value of {key}".encode() for key in keys)
    # The lifetime went with the value.
    namespace = old.default_kwargs["key_prefix"].decode()
    moved = next(k for k in keys if lead.moving(k))
    _, item = keyspace.value_and_item(three_memcached[2], f"{namespace}{moved}")
    assert 590 <= item.ttl() <= 600 + keyspace.CLOCK_SLACK
    assert migrate(lead).moved == 0
    assert clear_tombstones(old) == walked.moved
    assert not [k for k in keys if is_tombstone(old.get(k))]
    assert all(new.get(key) == f"value of {key}".encode() for key in keys)


def test_the_change_walks_again_until_a_walk_finds_nothing_to_move(rings, monkeypatch):
    """memcached's listing can miss an item it moves between its LRUs during
    the walk: the change walks once more after a walk that moved values,
    and the value the first walk missed reaches its new server."""
    from webfarm.core import poolchange
    from webfarm.core.client import changing

    old, lead, new = rings["old"], rings["lead"], rings["new"]
    keys = moving_keys(lead, 5, "missed")
    for key in keys:
        old.set(key, f"value of {key}".encode(), expire=600)
    listing, walks = changing.namespace_keys, []

    def missing_one_the_first_time(ring, *args, **kwargs):
        walks.append(ring)
        for found in listing(ring, *args, **kwargs):
            if len(walks) > 1 or not found[1].endswith(keys[0]):
                yield found

    monkeypatch.setattr(changing, "namespace_keys", missing_one_the_first_time)
    said: list[str] = []
    poolchange._migrate(lead, say=said.append)
    assert [line.split(":")[0] for line in said] == ["walk 1", "walk 2", "walk 3"], said
    assert "walk 2: 1 values moved" in said[1] and "walk 3: 0 values moved" in said[2], said
    assert all(new.get(key) == f"value of {key}".encode() for key in keys)


def test_a_reader_between_a_moves_two_writes_takes_the_tombstones_value(rings):
    old, follow, new = rings["old"], rings["follow"], rings["new"]
    key = moving_keys(follow, 1)[0]
    # The old value swapped, the new server not written yet (its writer paused).
    old.set(key, tombstone(b"carried", 60), expire=60)
    assert follow.get(key) == b"carried"
    assert new.get(key) == b"carried"  # added there, never over a writer's value


def test_a_stale_tombstones_value_is_never_used(rings):
    old, follow = rings["old"], rings["follow"]
    key = moving_keys(follow, 1)[0]
    written_long_ago = b"%s%d:60:old" % (TOMBSTONE, int((1_000_000_000 - FRESH) * 1000))
    old.set(key, written_long_ago, expire=60)
    assert follow.get(key) is None


def test_shrinking_moves_the_leaving_servers_keys_onto_the_others(three_memcached):
    namespace = f"pc{uuid.uuid4().hex[:8]}"
    old, new = build_client(three_memcached, namespace), build_client(three_memcached[:2], namespace)
    lead = ChangingRing(old, new, Phase.LEAD)
    keys = [f"s{i}" for i in range(300)]
    for key in keys:
        old.set(key, key.encode(), expire=600)
    leaving = old.hasher.nodes[-1]
    assert {k for k in keys if lead.moving(k)} == {k for k in keys if old.hasher.get_node(k) == leaving}
    migrate(lead)
    assert all(new.get(key) == key.encode() for key in keys)
    clear_tombstones(old)
    # The leaving server holds nothing of the namespace.
    assert not keyspace.items(three_memcached[2], namespace)


def test_emptying_a_removed_server_lists_it_again_until_nothing_comes_back(three_memcached):
    namespace, other = f"pc{uuid.uuid4().hex[:8]}", f"pc{uuid.uuid4().hex[:8]}"
    leaving, neighbour = (
        build_client(three_memcached[2:], namespace),
        build_client(three_memcached[2:], other),
    )
    for n in range(30):
        leaving.set(f"left{n}", b"x", expire=600)
    neighbour.set("kept", b"x", expire=600)
    stop = threading.Event()

    def straggler() -> None:  # a process that still writes there
        while not stop.wait(0.02):
            leaving.set("straggler", b"x", expire=600)

    writer = threading.Thread(target=straggler)
    writer.start()
    try:
        emptied = empty(leaving, quiet=0.5, limit=1.0, pause=0.1)
    finally:
        stop.set()
        writer.join()
    assert not emptied.clean and "straggler" in emptied.late and emptied.deleted >= 32
    quiet = empty(leaving, quiet=0.3, limit=5.0, pause=0.1)
    assert quiet.clean and quiet.late == [] and quiet.deleted <= 1  # the straggler's last write, if after
    assert not keyspace.items(three_memcached[2], namespace)
    assert neighbour.get("kept") == b"x"  # another namespace on the server: not the change's


# Keys in the farm's namespace no client of the text protocol can name,
# planted through the meta commands' base64 keys.
UNNAMEABLE = [b":q:\x01evil", b":job:\xff\xfe", b":a key\twith\r\nbreaks", b":\x00"]


def test_keys_no_client_can_name_stop_no_stage_and_are_deleted_with_the_rest(three_memcached):
    """The attack: one key with control bytes in its name, on the server a
    shrink removes, crashed the last stage (MemcacheIllegalInputError), and
    the command run again called the server free. The walk, the tombstones'
    clearing and the emptying pass over them, and the emptying deletes
    them: the server holds nothing of the namespace."""
    namespace = f"pc{uuid.uuid4().hex[:8]}"
    old, new = build_client(three_memcached, namespace), build_client(three_memcached[:2], namespace)
    leaving_address = three_memcached[2]
    for key in UNNAMEABLE:
        keyspace.plant_by_bytes(leaving_address, namespace.encode() + key, b"planted")
    for n in range(50):
        old.set(f"s{n}", b"x", expire=600)
    migrate(ChangingRing(old, new, Phase.LEAD))
    clear_tombstones(old)
    assert {item.key for item in keyspace.items(leaving_address, namespace)}, (
        "the planted keys are gone already"
    )
    leaving = build_client([leaving_address], namespace)
    emptied = empty(leaving, quiet=0.3, limit=5.0, pause=0.1)
    assert emptied.clean and emptied.deleted == len(UNNAMEABLE)
    assert not keyspace.items(leaving_address, namespace)
    assert all(new.get(f"s{n}") == b"x" for n in range(50))


@pytest.mark.parametrize(
    "planted",
    [
        TOMBSTONE,
        TOMBSTONE + b"not-a-time:60:forged",
        TOMBSTONE + b"%d:60:from the future" % ((time.time() + 3600) * 1000),
        TOMBSTONE + b"%d:999999999:a lifetime memcached would read as a date" % (time.time() * 1000),
        TOMBSTONE + b"9" * 400 + b":60:forged",
        TOMBSTONE + b"%d:" % (time.time() * 1000),
        TOMBSTONE + bytes(range(256)),
    ],
    ids=["bare", "no time", "future", "date lifetime", "long time", "no lifetime", "junk"],
)
def test_a_planted_tombstone_is_never_taken_for_a_move(rings, planted):
    """memcached is shared: whoever plants a tombstone-looking value on a
    moving key's old server makes it read as missing, and puts nothing on
    the new server."""
    old, new = rings["old"], rings["new"]
    key = moving_keys(rings["lead"], 1, "planted")[0]
    old.set(key, planted, expire=60)
    for phase in ("follow", "lead"):
        ring = rings[phase]
        assert ring.get(key) is None and ring.gets(key) == (None, None)
        assert ring.get_many([key]) == {}
    assert new.get(key) is None


def test_a_delete_ends_the_key_on_both_servers(rings):
    old, lead, follow, new = rings["old"], rings["lead"], rings["follow"], rings["new"]
    key = moving_keys(lead, 1)[0]
    lead.set(key, b"x", expire=60)
    assert follow.delete(key)
    assert old.get(key) is None and new.get(key) is None
    assert follow.add(key, b"again", expire=60)  # new again: a follower makes it on the old server
    assert old.get(key) == b"again" and lead.get(key) == b"again"


def test_get_many_follows_tombstones_in_one_more_trip(rings):
    old, lead, follow = rings["old"], rings["lead"], rings["follow"]
    keys = [*moving_keys(lead, 6, "many"), "still1", "still2"]
    for i, key in enumerate(keys):
        (lead if i % 2 else old).set(key, key.encode(), expire=60)
    assert follow.get_many(keys) == {k: k.encode() for k in keys}
    assert lead.get_many(keys) == {k: k.encode() for k in keys}


def test_read_modify_writes_by_cas_lose_no_update_while_the_keys_move(rings):
    """A job record's pattern: gets, change, cas, again on a lost race; by
    followers and leaders at once while migrate() moves the keys."""
    follow, lead, new = rings["follow"], rings["lead"], rings["new"]
    keys = moving_keys(lead, 4, "record")
    for key in keys:
        rings["old"].set(key, b"", expire=600)

    def append(ring, mark, times):
        for _ in range(times):
            for key in keys:
                for _ in range(200):
                    value, token = ring.gets(key)
                    if ring.cas(key, value + mark, token, expire=600):
                        break
                else:
                    raise AssertionError(f"{key}: no cas won in 200 tries")

    threads = [
        threading.Thread(target=append, args=(ring, mark, 25))
        for ring, mark in ((follow, b"f"), (lead, b"l"), (follow, b"g"), (lead, b"m"))
    ]
    for t in threads:
        t.start()
    walks = [migrate(lead) for _ in range(3)]
    for t in threads:
        t.join()
    migrate(lead)
    assert sum(w.moved for w in walks) <= len(keys)
    for key in keys:
        value = new.get(key)
        assert sorted(value) == sorted(b"f" * 25 + b"l" * 25 + b"g" * 25 + b"m" * 25), key


# -- meta commands while the pool changes (webfarm/core/client/changing_meta.py) --


def _neighbours(rings):
    """Each pair of kinds that run side by side: (earlier, later)."""
    return [("old", "follow"), ("follow", "lead"), ("lead", "new")]


def test_a_record_written_by_meta_commands_is_one_record_for_both_neighbours(rings):
    """What the job store does in one batch (an add with a lifetime, a read
    with its CAS, a write at that CAS, a delete), each step by either kind."""
    for first, second in _neighbours(rings):
        a, b = rings[first], rings[second]
        for key in moving_keys(rings["lead"], 4, f"rec-{first}-"):
            batch = MetaBatch(a)
            added = batch.set(key, value=b"queued", ttl=60, mode="add")
            assert batch.run()[added].done
            again = MetaBatch(b)
            twice = again.set(key, value=b"a second record", ttl=60, mode="add")
            theirs = again.get(key, cas=True)
            replies = again.run()
            assert not replies[twice].done and replies[theirs].value == b"queued"
            # A read-modify-write by each (a CAS is the process's own, as
            # read): the first to write wins, the other's CAS is stale.
            mine = MetaBatch(a)
            read = mine.get(key, cas=True)
            token = mine.run()[read].cas
            write = MetaBatch(a)
            stored = write.set(key, value=b"running", ttl=60, cas=token)
            assert write.run()[stored].done
            stale = MetaBatch(b)
            lost = stale.set(key, value=b"stale", ttl=60, cas=replies[theirs].cas)
            assert stale.run()[lost].changed
            check = MetaBatch(b)
            seen = check.get(key)
            assert check.run()[seen].value == b"running", (first, second, key)
            gone = MetaBatch(a)
            gone.delete(key)
            gone.run()
            assert b.get(key) is None and a.get(key) is None


def test_counters_made_and_bumped_by_meta_commands_lose_no_count(rings):
    """A vote's `ma N J v` (made on a miss, then counted) and a final write's
    `ma D` by both kinds of each pair: one total."""
    for first, second in _neighbours(rings):
        kinds = (rings[first], rings[second])
        for key in moving_keys(rings["lead"], 3, f"cnt-{first}-"):
            seen = []
            for i in range(20):
                batch = MetaBatch(kinds[i % 2])
                index = batch.arithmetic(key, vivify=60, initial=1, value=True)
                seen.append(batch.run()[index].number())
            assert seen == list(range(1, 21)), (first, second, seen)
            bump = MetaBatch(kinds[1])
            bump.arithmetic(key, delta=5)
            assert bump.run()[0].done
            assert kinds[0].get(key) == kinds[1].get(key) == b"25"


def test_a_moving_keys_commands_and_the_others_answer_in_the_batchs_order(rings):
    lead = rings["lead"]
    moving = moving_keys(lead, 3, "mix")
    staying = [k for k in (f"mix-s{i}" for i in range(60)) if not lead.moving(k)][:3]
    batch = MetaBatch(lead)
    order = []
    for m, s in zip(moving, staying, strict=True):
        order += [batch.set(m, value=m.encode(), ttl=60), batch.set(s, value=s.encode(), ttl=60)]
    reads = [batch.get(k) for pair in zip(moving, staying, strict=True) for k in pair]
    replies = batch.run()
    assert all(replies[i].done for i in order)
    assert [replies[i].value for i in reads] == [
        k.encode() for p in zip(moving, staying, strict=True) for k in p
    ]
    # The moving ones live on their new server, as a leader makes them.
    assert [rings["new"].get(k) for k in moving] == [k.encode() for k in moving]


def test_a_cache_that_recomputes_on_a_miss_stays_where_the_old_list_puts_it(rings):
    """memo's own calls route its keys by the old list until NEW: a batch's
    read of one asks the same server."""
    follow = rings["follow"]
    key = moving_keys(follow, 1, "memo")[0]
    batch = MetaBatch(follow)
    asked = batch.get(key, vivify=30, recache=30)
    reply = batch.run()[asked]
    assert reply.won and not reply.value  # made empty on the miss: this caller recomputes
    assert rings["old"].get(key) == b"" and rings["new"].get(key) is None


def test_a_flag_the_change_does_not_know_is_refused_not_guessed(rings):
    key = moving_keys(rings["lead"], 1, "odd")[0]
    batch = MetaBatch(rings["lead"])
    batch.add(b"mg", key, "v", "t")  # a remaining-lifetime read: not one the farm sends
    with pytest.raises(ValueError, match="has no meaning while the pool changes"):
        batch.run()


def test_a_moving_document_nginx_reads_goes_dark_never_a_tombstone(rings):
    """nginx cannot follow a tombstone and would serve one: a moving public
    document is deleted by every write during the change, so nginx misses
    and asks Django (which reads the record)."""
    old, follow, lead, new = rings["old"], rings["follow"], rings["lead"], rings["new"]
    keys = [k for k in (f"pub:doc{i}" for i in range(200)) if lead.moving(k)][:3]
    assert keys and all(lead.dark(k) for k in keys)
    first, second, third = keys
    old.set(first, b"published before the change", expire=60)
    for ring in (follow, lead):
        assert ring.set(first, b"a newer one", expire=60)
        assert old.get(first) is None and new.get(first) is None and ring.get(first) is None
        batch = MetaBatch(ring)
        batch.set(second, value=b"by a batch", ttl=60)
        batch.set(second, value=b"added by a batch", ttl=60, mode="add")  # an add puts nothing back
        batch.get(second)
        assert [r.status for r in batch.run()] == [b"HD", b"NS", b"EN"]
        assert old.get(second) is None and new.get(second) is None
        # A poll's republish (an add) keeps it dark, and costs no round trip.
        assert ring.add(first, b"put back", expire=60) is False
        assert old.get(first) is None and new.get(first) is None
    old.set(third, b"left by a process of the old ring", expire=60)
    walked = migrate(lead)
    assert walked.dark >= 1 and old.get(third) is None and new.get(third) is None
    assert not any(is_tombstone(old.get(k)) for k in keys)


def test_migrate_leaves_the_keys_a_group_keeps_together_where_they_are(rings):
    """A queue's entries, a scope's slots and the broker's keys live on
    their group's server, not their own key's: moving one alone would put
    a tombstone where the queue reads a message. memo's values and the
    queue front's byte count live where their callers route them, on the
    old list's server until the change's NEW stage: moved, memo read the
    tombstone as a planted value, computed again and wrote it back there,
    and every walk found it to move again."""
    from webfarm.core.memo import memo_key
    from webfarm.queues.front import FRONT_BYTES

    old, lead = rings["old"], rings["lead"]
    prefixes = ("q:votes:ab12cd34:m:", "dq:votes:ab12cd34:m:", "slot:alice:", "broker:q:celery:1:m:")
    grouped = [
        k for prefix in (*prefixes, memo_key("dashboard:"), FRONT_BYTES) for k in moving_keys(lead, 2, prefix)
    ]
    for key in grouped:
        old.set(key, b"entry " + key.encode(), expire=60)
    migrate(lead)
    assert {key: old.get(key) for key in grouped} == {key: b"entry " + key.encode() for key in grouped}


@pytest.mark.parametrize(
    "failure", [ConnectionRefusedError("refused"), MemcacheClientError("refused a delete")]
)
def test_a_removed_server_that_was_not_emptied_is_never_called_free(monkeypatch, failure):
    """Whether it does not answer or refuses a delete, the change's last
    step says it was not emptied, and how to empty it, as an error."""
    from types import SimpleNamespace

    from webfarm.core import poolchange

    def failing(*args: object, **kwargs: object) -> None:
        raise failure

    monkeypatch.setattr(poolchange, "empty", failing)
    said: list[str] = []
    row = SimpleNamespace(old="127.0.0.1:9,127.0.0.1:10", new="127.0.0.1:9")
    with pytest.raises(poolchange.PoolChangeError, match=r"127\.0\.0\.1:10 was not emptied") as raised:
        poolchange._empty_removed(row, say=said.append)
    assert "memcached_pool --to 127.0.0.1:9 again" in str(raised.value)
    assert not any("can be stopped" in line or "nothing left" in line for line in said)


def test_a_walk_lists_a_key_rewritten_while_it_walks(three_memcached):
    """memcached's walk of its LRUs missed a key that was written meanwhile
    (15 of 200 walks here): a change walked twice that way left a job's
    record on the old server. The walk of the hash table lists it every time."""
    server = three_memcached[0]
    namespace = f"walk{uuid.uuid4().hex[:8]}"
    client = build_client([server], namespace)
    for i in range(2000):
        client.set(f"filler{i}", b"x" * 50, noreply=False)
    stop = threading.Event()

    def rewrite() -> None:
        writer = build_client([server], namespace)
        n = 0
        while not stop.is_set():
            writer.set("hot", str(n).encode(), noreply=False)
            n += 1

    thread = threading.Thread(target=rewrite)
    thread.start()
    try:
        missed = sum(f"{namespace}:hot".encode() not in {k for k, _ in _listing(server)} for _ in range(100))
    finally:
        stop.set()
        thread.join()
    assert missed == 0


def test_a_memcached_without_a_hash_walk_is_walked_by_its_lrus(monkeypatch):
    """Before 1.6.9 memcached answers `metadump hash` with BADCLASS."""
    asked: list[bytes] = []

    def metadump(address: str, which: bytes):
        asked.append(which)
        if which == b"hash":
            raise _NoHashWalk
        yield b"k", -1

    monkeypatch.setattr(changing, "_metadump", metadump)
    assert list(_listing("127.0.0.1:1")) == [(b"k", -1)]
    assert asked == [b"hash", b"all"]
