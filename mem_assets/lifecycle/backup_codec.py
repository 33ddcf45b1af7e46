"""Exact JSON encoding of Neo4j property values, so a backup restores the same types it read.

JSON keeps strings, booleans, ints and floats (``repr`` round-trips every double, so embeddings
come back bit for bit). Everything else Neo4j can store — temporal values, durations, points,
byte arrays — becomes a tagged object ``{"$t": kind, ...}``. Neo4j properties are never maps,
so an object in a backup is always a tag.

One loss is inherent to the Python driver: it reads a datetime in zone ``UTC`` and one at
offset ``Z`` as the same value; both restore at offset ``Z``, the same instant.
"""

from __future__ import annotations

import base64
import json
from datetime import timedelta, timezone, tzinfo
from typing import Any

import pytz
from neo4j.spatial import CartesianPoint, Point, WGS84Point
from neo4j.time import Date, DateTime, Duration, Time

TAG = "$t"
_JSON_SCALARS = frozenset({str, int, float, bool})
_POINT_TYPES: dict[int, type[Point]] = {7203: CartesianPoint, 9157: CartesianPoint,
                                        4326: WGS84Point, 4979: WGS84Point}


class CodecError(ValueError):
    """A value that Neo4j cannot hold as a property, or a tag this codec does not know."""


def _zone_name(tz: tzinfo) -> str | None:
    name = getattr(tz, "zone", None)
    return name if name and name != "UTC" else None


def _offset_seconds(value: DateTime | Time) -> int:
    offset = value.utcoffset()
    assert offset is not None
    return int(offset.total_seconds())


def _time_parts(value: DateTime | Time) -> list[int]:
    return [value.hour, value.minute, int(value.second), value.nanosecond]


def _date_time_parts(value: DateTime) -> list[int]:
    return [value.year, value.month, value.day, *_time_parts(value)]


def encode_value(value: Any) -> Any:
    """A JSON-ready form of one property value (lists element by element)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        if all(type(item) in _JSON_SCALARS for item in value):
            return value
        return [encode_value(item) for item in value]
    if isinstance(value, DateTime):
        if value.tzinfo is None:
            return {TAG: "localdatetime", "v": _date_time_parts(value)}
        zone = _zone_name(value.tzinfo)
        if zone is not None:
            return {TAG: "datetime", "utc": _date_time_parts(value.astimezone(pytz.UTC)), "zone": zone}
        return {TAG: "datetime", "v": _date_time_parts(value), "offset": _offset_seconds(value)}
    if isinstance(value, Date):
        return {TAG: "date", "v": [value.year, value.month, value.day]}
    if isinstance(value, Time):
        if value.tzinfo is None:
            return {TAG: "localtime", "v": _time_parts(value)}
        return {TAG: "time", "v": _time_parts(value), "offset": _offset_seconds(value)}
    if isinstance(value, Duration):
        return {TAG: "duration", "v": [value.months, value.days, value.seconds, value.nanoseconds]}
    if isinstance(value, Point):
        return {TAG: "point", "srid": value.srid, "v": list(value)}
    if isinstance(value, (bytes, bytearray)):
        return {TAG: "bytes", "v": base64.b64encode(bytes(value)).decode("ascii")}
    raise CodecError(f"cannot encode a property value of type {type(value).__name__}")


def _offset(seconds: int) -> timezone:
    """A stdlib offset: pytz's offset 0 is its UTC *zone*, which Neo4j would store as ``[UTC]``."""
    return timezone(timedelta(seconds=seconds))


def decode_value(value: Any) -> Any:
    """The driver value to write back for one encoded property value."""
    if isinstance(value, list):
        if all(type(item) in _JSON_SCALARS for item in value):
            return value
        return [decode_value(item) for item in value]
    if not isinstance(value, dict):
        return value
    kind = value.get(TAG)
    parts = value.get("v")
    match kind:
        case "localdatetime":
            return DateTime(*parts)
        case "datetime" if "zone" in value:
            return DateTime(*value["utc"], tzinfo=pytz.UTC).astimezone(pytz.timezone(value["zone"]))
        case "datetime":
            return DateTime(*parts, tzinfo=_offset(value["offset"]))
        case "date":
            return Date(*parts)
        case "localtime":
            return Time(*parts)
        case "time":
            return Time(*parts, tzinfo=pytz.FixedOffset(value["offset"] // 60))
        case "duration":
            months, days, seconds, nanoseconds = parts
            return Duration(months=months, days=days, seconds=seconds, nanoseconds=nanoseconds)
        case "point":
            point_type = _POINT_TYPES.get(value["srid"])
            if point_type is None:
                raise CodecError(f"unknown point SRID {value['srid']}")
            return point_type(parts)
        case "bytes":
            return bytearray(base64.b64decode(parts))
    raise CodecError(f"unknown value tag {kind!r}")


def encode_properties(props: dict[str, Any]) -> dict[str, Any]:
    return {key: encode_value(value) for key, value in props.items()}


def decode_properties(props: dict[str, Any]) -> dict[str, Any]:
    return {key: decode_value(value) for key, value in props.items()}


def dumps_line(record: dict[str, Any]) -> str:
    """One canonical JSON line: sorted keys, no spaces, UTF-8 text kept as is."""
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"
