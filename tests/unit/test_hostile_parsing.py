"""Line parsing, text cleaning and tenant names under hostile input, without Dagster or Neo4j."""

import time
from pathlib import Path

import pytest

from mem_assets.context_graph.records import ContextRecord
from mem_assets.ingest.inbox import Rejection
from mem_assets.ingest.parsing import (
    MAX_NESTING_DEPTH,
    ParsedLine,
    nesting_depth,
    parse_jsonl,
    parse_lines,
)
from mem_assets.ingest.text_input import clean_text
from mem_resources.tenants import InvalidTenant, is_valid_tenant, validate_tenant


def test_nesting_depth_ignores_brackets_inside_strings_and_stays_linear():
    assert nesting_depth(b'{"a": [1, {"b": 2}]}', 32) == 3
    assert nesting_depth(b'{"memory": "' + b"[" * 500 + b'"}', 32) == 1
    assert nesting_depth(b'{"m": "\\"[[[["}' + b"[" * 40, 32) == 33
    hostile = b'"\\' * 200_000 + b"[" * 64
    started = time.perf_counter()
    assert nesting_depth(hostile, 32) <= 33
    assert time.perf_counter() - started < 2


def test_a_line_at_the_limit_parses_and_one_past_it_is_refused(tmp_path: Path):
    inner = "[" * (MAX_NESTING_DEPTH - 3) + "]" * (MAX_NESTING_DEPTH - 3)
    at_limit = '{"memory": "ok", "sources": [{"x": ' + inner + "}]}"
    past = '{"memory": "ok", "sources": [{"x": [' + inner + "]}]}"
    path = tmp_path / "f.jsonl"
    path.write_text(at_limit + "\n" + past + "\n")
    first, second = parse_lines(path, max_chars=100)
    assert isinstance(first, ParsedLine)
    assert isinstance(second, Rejection) and second.kind == "too_deep"


def test_an_overlong_line_is_skipped_without_losing_line_numbers(tmp_path: Path):
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"memory": "' + b"x" * 5000 + b'"}\n{"memory": "after"}\n')
    first, second = parse_jsonl(path, ContextRecord, max_line_bytes=1000)
    assert isinstance(first, Rejection) and (first.line, first.kind) == (1, "line_too_long")
    assert isinstance(second, Rejection) and second.line == 2 and second.kind == "invalid_fields"


def test_every_exception_of_one_line_is_that_lines_rejection(tmp_path: Path):
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"\n".join([
        b"[" * 100_000, b'{"memory": "x", "confidence": 1' + b"0" * 5000 + b"}",
        b'{"memory": "\\udfff"}', b'{"memory": "fine"}', b""]))
    kinds = [e.kind if isinstance(e, Rejection) else e.item.memory for e in parse_lines(path, 100)]
    assert kinds == ["too_deep", "not_json", "invalid_unicode", "fine"]


def test_clean_text_removes_invisibles_and_keeps_joiners_that_shape_text():
    assert clean_text("\ufeffa\u200bb\u2060c\x00\x1b[31m\r\n") == "abc[31m\n"
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    assert clean_text(family) == family
    assert clean_text("\u200dword\u200d") == "word"
    assert clean_text("\u202eevil\u202c\U000e0041") == "evil"
    assert clean_text("tab\tand newline\n stay") == "tab\tand newline\n stay"


@pytest.mark.parametrize("name", ["alice", "A1", "t_0.b-c", "x" * 64])
def test_valid_tenant_names(name: str):
    assert validate_tenant(name) == name


@pytest.mark.parametrize("name", ["", "../x", "..", ".a", "-a", "_a", "a/b", "a\\b", "alice\n",
                                  "alice\r", "a b", "ä", "x" * 65, "a\x00", None, 5])
def test_invalid_tenant_names(name: object):
    assert not is_valid_tenant(name)
    with pytest.raises(InvalidTenant):
        validate_tenant(name)
