"""Property values survive encode → JSON → decode with their exact Neo4j types."""

import json
import math

import pytest
from neo4j.time import DateTime

from mem_assets.lifecycle.backup_codec import (
    CodecError,
    decode_value,
    dumps_line,
    encode_value,
)
from tests.support.lifecycle import EXOTIC


@pytest.mark.parametrize("name", sorted(EXOTIC))
def test_every_property_type_round_trips_through_json(name: str):
    value = EXOTIC[name]
    back = decode_value(json.loads(json.dumps(encode_value(value))))
    assert type(back) is type(value)
    assert back == value
    assert encode_value(back) == encode_value(value)


def test_float_embeddings_round_trip_bit_for_bit_and_ints_stay_ints():
    embedding = [0.15811388194561005, -1e-310, 1 / 3, 0.0, math.pi]
    assert json.loads(dumps_line({"e": embedding, "n": 3}))["e"] == embedding
    assert type(json.loads(dumps_line({"n": 3}))["n"]) is int


def test_zoned_datetime_keeps_zone_and_offset_datetime_keeps_offset():
    zoned = decode_value(encode_value(EXOTIC["when_zoned"]))
    assert zoned.tzinfo.zone == "Europe/Berlin" and zoned.nanosecond == 123456789
    offset = decode_value(encode_value(EXOTIC["when_offset"]))
    assert offset.utcoffset().total_seconds() == -330 * 60
    assert getattr(offset.tzinfo, "zone", None) is None


def test_unknown_tags_and_unsupported_values_are_refused():
    with pytest.raises(CodecError, match="unknown value tag"):
        decode_value({"$t": "mystery"})
    with pytest.raises(CodecError, match="cannot encode"):
        encode_value({"a": 1})


def test_canonical_lines_sort_keys_and_keep_unicode():
    assert dumps_line({"b": 1, "a": "北京"}) == '{"a":"北京","b":1}\n'
    assert isinstance(decode_value(encode_value(DateTime(2026, 1, 1, 0, 0, 0, 1))), DateTime)
