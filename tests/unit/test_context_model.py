"""The context record format: ownership by prefix, conversation ids, per-tenant config, seed 002 ids."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from mem_assets.context_graph.records import (
    ContextConfig,
    ContextError,
    ContextRecord,
    TenantContext,
    build_rows,
    context_memory_id,
)
from mem_resources.memory_model import memory_id, payload_hash

NOW = datetime(2026, 3, 1, tzinfo=UTC)
PEOPLE = {"user_id": "xnne", "agent_id": "congyin", "scene": "chill_ai_chat"}


def _record(text: str, **fields: object) -> ContextRecord:
    return ContextRecord.model_validate({"memory": text, "created_at": "2026-02-27T12:08:26Z", **PEOPLE, **fields})


def test_owner_character_comes_from_the_prefix_and_the_configured_ids():
    profile = TenantContext(user_id="u1", agent_id="a1", scene="s")
    records = [ContextRecord(memory="[User] likes tea", created_at=NOW),
               ContextRecord(memory="[Agent] is shy", created_at=NOW)]
    rows = build_rows("t", records, profile, NOW)
    owners = {row["owner"] for rows_ in rows.memories.values() for row in rows_}
    assert owners == {"char:u1", "char:a1"}
    assert set(rows.users) == {"user:u1"} and set(rows.agents) == {"agent:a1"}
    assert rows.agents["agent:a1"]["character"] == "char:a1"


def test_record_fields_override_the_tenant_config_and_name_characters():
    profile = TenantContext(user_id="u1", agent_id="a1", scene="s")
    record = _record("[Agent] 不太擅长说话。", agent_character={"id": "congyin", "name": "聪音 (Congyin)"})
    rows = build_rows("t", [record], profile, NOW)
    assert rows.characters["char:congyin"] == {
        "id": "char:congyin", "character_id": "congyin", "name": "聪音 (Congyin)", "display": "congyin"}
    assert set(rows.characters) == {"char:xnne", "char:congyin"}


def test_missing_user_agent_or_scene_is_an_error_not_a_guess():
    with pytest.raises(ContextError, match="user_id and agent_id"):
        build_rows("t", [ContextRecord(memory="[User] x", created_at=NOW)], TenantContext(), NOW)
    with pytest.raises(ContextError, match="scene"):
        build_rows("t", [ContextRecord(memory="[User] x", created_at=NOW, user_id="u", agent_id="a")],
                   TenantContext(), NOW)


def test_memory_text_needs_an_owner_prefix():
    with pytest.raises(ValidationError, match=r"\[User\] or \[Agent\]"):
        _record("likes tea")


@pytest.mark.parametrize(("given", "stored"), [
    (None, "2026-02-27"), ("2026-02-28", "2026-02-28"), ("ch07", "ch07"), ("conv:ch00", "ch00"),
])
def test_conversation_is_by_date_or_by_chapter(given, stored):
    record = _record("[User] x", **({} if given is None else {"conversation": given}))
    assert record.conversation == stored
    assert set(build_rows("t", [record], TenantContext(), NOW).conversations) == {f"conv:{stored}"}


@pytest.mark.parametrize("bad", ["27/02/2026", "chapter1", "conv:", "2026-02-27T10:00"])
def test_other_conversation_formats_are_rejected(bad):
    with pytest.raises(ValidationError, match="conversation"):
        _record("[User] x", conversation=bad)


@pytest.mark.parametrize("field", ["user_id", "agent_id", "scene"])
def test_ids_with_separators_are_rejected(field):
    with pytest.raises(ValidationError):
        _record("[User] x", **{field: "a:b"})


def test_claim_ids_follow_seed_002():
    record = _record("[Agent] 不太擅长说话。", claims=[
        {"predicate": "SELF_TRAIT", "domain": "writing", "object": "不太擅长说话", "confidence": 0.86}])
    [claim] = build_rows("t", [record], TenantContext(), NOW).claims
    assert claim["id"] == "claim:SELF_TRAIT|writing|agent:congyin|tag:不太擅长说话"
    assert claim["domain_id"] == "dom:char:congyin:writing"
    assert claim["predicate_id"] == "pred:char:congyin:writing:SELF_TRAIT"
    assert claim["character"] == "char:congyin"
    assert claim["props"]["name"] == claim["props"]["display"] == "SELF_TRAIT (writing)"
    assert claim["props"]["status"] == "active" and claim["props"]["confidence"] == 0.86


def test_claim_about_the_other_party_and_separators_in_objects():
    record = _record("[Agent] xnne said she lives in Shanghai.", claims=[
        {"predicate": "LIVES_IN", "domain": "location", "object": "city: 上海 | 徐汇", "about": "user"}])
    [claim] = build_rows("t", [record], TenantContext(), NOW).claims
    assert claim["id"] == "claim:LIVES_IN|location|user:xnne|tag:city： 上海 ｜ 徐汇"
    assert claim["props"]["object"] == "city: 上海 | 徐汇"
    assert claim["character"] == "char:xnne"


def test_memory_id_is_the_plain_memory_id_of_the_same_text():
    record = _record("  [User] 会使用一个小杯子来给茶散热。 ")
    expected = memory_id(payload_hash("t", "LongTermMemory", "[User] 会使用一个小杯子来给茶散热。"))
    assert context_memory_id("t", record) == expected
    assert context_memory_id("other", record) != expected


def test_tenant_config_merges_defaults_with_overrides():
    config = ContextConfig.model_validate({
        "default": {"single_valued_predicates": ["LIVES_IN"], "scene": "chat"},
        "tenants": {"xnne": {"user_id": "xnne", "agent_id": "congyin"}},
    })
    profile = config.for_tenant("xnne")
    assert (profile.user_id, profile.agent_id, profile.scene) == ("xnne", "congyin", "chat")
    assert profile.single_valued_predicates == ["LIVES_IN"]
    assert config.for_tenant("someone").user_id is None
