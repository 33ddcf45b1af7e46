"""Inbox line validation and id planning, without Dagster or Neo4j."""

from pathlib import Path

from mem_assets.ingest.inbox import Rejection
from mem_assets.ingest.memory_nodes import plan
from mem_assets.ingest.parsing import MemoryItemIn, ParsedLine, parse_lines


def test_parse_lines_streams_good_and_bad_lines_with_line_numbers(tmp_path: Path):
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"memory": "ok"}\n\n{"memory": 5}\n{"memory": "ok2", "confidence": 2}\n')
    out = list(parse_lines(path, max_chars=100))
    assert isinstance(out[0], ParsedLine) and out[0].line == 1
    assert isinstance(out[1], Rejection) and out[1].line == 3
    assert "memory: Input should be a valid string" in out[1].reason
    assert isinstance(out[2], Rejection) and "confidence" in out[2].reason


def test_plan_gives_tenant_scoped_ids_and_collapses_repeats():
    items = [MemoryItemIn(memory="Same  text"), MemoryItemIn(memory="Same text"),
             MemoryItemIn(memory="Raw", memory_type="RawFileMemory")]
    a = plan("alice", items)
    b = plan("bob", items[:1])
    assert len(a) == 2
    assert a[0].node_id != b[0].node_id
    assert a[0].working_id is not None and a[1].working_id is None
