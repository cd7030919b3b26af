from strands_durable.store.keys import Keys, new_session_id, shard_of


def test_session_keys_share_their_shards_hash_tag() -> None:
    keys = Keys("p", shards=8)
    sid = new_session_id(5, 8)
    assert shard_of(sid, 8) == 5
    tag = "{s5}"
    for key in [*keys.session_keys(sid), keys.stream(5), keys.timers(5), keys.dead(5),
                keys.index_all(5), keys.conversation(sid, "agent")]:
        assert key.startswith("p:") and tag in key, key


def test_session_ids_are_uuids_on_every_shard() -> None:
    import uuid

    for shard in range(4):
        sid = new_session_id(shard, 4)
        assert str(uuid.UUID(sid)) == sid and shard_of(sid, 4) == shard
