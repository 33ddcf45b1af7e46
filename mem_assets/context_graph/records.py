"""Seed 002's conversational context: the record format both pipelines send, and its node ids.

A realtime chat pipeline and an offline batch import describe each memory the same way: text
with a ``[User]`` / ``[Agent]`` prefix, who the user and agent are, the scene, the conversation
(``conv:YYYY-MM-DD`` for realtime, ``conv:chNN`` for offline chapters) and optional claims.
This module validates those records and turns a batch into the rows the Cypher writer
(``mem_assets.context_graph.queries``) MERGEs — pure code, no Neo4j.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from mem_assets.ingest.text_input import Cleaned, Visible
from mem_resources.memory_model import (
    MemoryType,
    memory_id,
    normalize_text,
    payload_hash,
)

#: Node type by id prefix (seed 002, "节点类型").
NODE_TYPE_BY_PREFIX = {
    "mem:": "MemoryItem", "char:": "Character", "conv:": "Conversation", "scene:": "Scene",
    "user:": "User", "agent:": "Agent", "claim:": "Claim", "dom:": "Domain", "pred:": "Predicate",
    "topic:": "Topic",
}

#: Relationship type → (source type, target type): seed 002's twelve, with their fixed directions.
RELATIONSHIPS = {
    "OWNS_MEMORY": ("Character", "MemoryItem"),
    "IN_SCENE": ("MemoryItem", "Scene"),
    "HAS_CHARACTER": ("MemoryItem", "Character"),
    "FROM_CONV": ("MemoryItem", "Conversation"),
    "CONV_IN_SCENE": ("Conversation", "Scene"),
    "CONV_HAS_CHARACTER": ("Conversation", "Character"),
    "ACTOR": ("Agent", "Character"),
    "HAS_DOMAIN": ("Character", "Domain"),
    "HAS_PREDICATE": ("Domain", "Predicate"),
    "HAS_CLAIM": ("Predicate", "Claim"),
    "ABOUT": ("Claim", "Topic"),
    "EVIDENCED_BY": ("Claim", "MemoryItem"),
}

#: Keys every node of a type carries (seed 002's identifying properties); other properties vary
#: by pipeline — MemoryItem's most of all — and only their absence is an expected difference.
BASE_PROPERTIES = ("id", "user_name")
REQUIRED_PROPERTIES = {
    "MemoryItem": BASE_PROPERTIES,
    "Character": (*BASE_PROPERTIES, "character_id", "name", "display"),
    "Conversation": (*BASE_PROPERTIES, "conv_id", "name", "display"),
    "Scene": (*BASE_PROPERTIES, "scene_id", "name", "display"),
    "User": (*BASE_PROPERTIES, "user_id", "name", "display"),
    "Agent": (*BASE_PROPERTIES, "agent_id", "name", "display"),
    "Claim": (*BASE_PROPERTIES, "predicate", "domain", "status", "name", "display"),
    "Domain": (*BASE_PROPERTIES, "domain", "character_id", "name", "display"),
    "Predicate": (*BASE_PROPERTIES, "predicate", "domain", "character_id", "name", "display"),
    "Topic": (*BASE_PROPERTIES, "name", "display"),
}

ACTIVE = "active"
SUPERSEDED = "superseded"
DEFAULT_ISOLATION = "tenant"
DEFAULT_COLLECTION = "memtend"

_DATE_CONV = re.compile(r"\d{4}-\d{2}-\d{2}")
_CHAPTER_CONV = re.compile(r"ch\d{2,}")
_ID_SEPARATORS = str.maketrans({":": "：", "|": "｜"})


def _no_separators(value: str) -> str:
    if any(sep in value for sep in ":|") or value != value.strip() or not value:
        raise ValueError(f"{value!r}: ids may not be empty, contain ':' or '|', or be padded")
    return value


#: A name used inside node ids (character, user, agent, scene, domain, predicate).
Ident = Annotated[str, StringConstraints(max_length=200), AfterValidator(_no_separators)]


class Role(StrEnum):
    USER = "user"
    AGENT = "agent"


ROLE_BY_PREFIX = {"[User]": Role.USER, "[Agent]": Role.AGENT}


def owner_role(text: str) -> Role:
    """The seed's ownership rule: the memory belongs to the user or agent named by its prefix."""
    for prefix, role in ROLE_BY_PREFIX.items():
        if text.startswith(prefix):
            return role
    raise ValueError("memory text must start with [User] or [Agent]")


def id_token(text: str) -> str:
    """Free text made safe inside an id: separators become their full-width forms."""
    return normalize_text(text).translate(_ID_SEPARATORS)


class CharacterRef(BaseModel):
    """A character: ``char:<id>``; ``name`` is its display name, e.g. ``聪音 (Congyin)``."""

    model_config = ConfigDict(extra="forbid")

    id: Ident
    name: str | None = None


class ClaimRecord(BaseModel):
    """A claim a memory evidences: ``<about>`` has ``object`` for ``predicate`` in ``domain``."""

    model_config = ConfigDict(extra="forbid")

    predicate: Ident
    domain: Ident
    object: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=500), Cleaned,
                      Visible]
    status: Ident = ACTIVE
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    about: Role | None = Field(default=None, description="whose claim; defaults to the memory's owner")
    topic: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200), Cleaned,
                     Visible] | None = None


class TenantContext(BaseModel):
    """Per-tenant defaults for fields a record leaves out (the user, the agent, their characters)."""

    model_config = ConfigDict(extra="forbid")

    user_id: Ident | None = None
    agent_id: Ident | None = None
    user_character: CharacterRef | None = None
    agent_character: CharacterRef | None = None
    scene: Ident | None = None
    single_valued_predicates: list[str] = Field(default_factory=list)
    isolation: str = DEFAULT_ISOLATION
    collection: str = DEFAULT_COLLECTION


class ContextConfig(BaseModel):
    """The context config file: defaults for every tenant, overridden per tenant."""

    model_config = ConfigDict(extra="forbid")

    default: TenantContext = Field(default_factory=TenantContext)
    tenants: dict[str, TenantContext] = Field(default_factory=dict)

    def for_tenant(self, tenant: str) -> TenantContext:
        override = self.tenants.get(tenant)
        if override is None:
            return self.default
        merged = self.default.model_dump(exclude_unset=False)
        merged.update(override.model_dump(exclude_unset=True))
        return TenantContext.model_validate(merged)


class ContextRecord(BaseModel):
    """One memory as the realtime and offline pipelines send it (one JSONL line)."""

    model_config = ConfigDict(extra="forbid")

    memory: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=20_000), Cleaned,
                      Visible]
    created_at: datetime
    conversation: str | None = Field(
        default=None, description="YYYY-MM-DD (realtime) or chNN (offline); default: created_at's date")
    scene: Ident | None = None
    user_id: Ident | None = None
    agent_id: Ident | None = None
    user_character: CharacterRef | None = None
    agent_character: CharacterRef | None = None
    memory_type: MemoryType = MemoryType.LONG_TERM
    point_id: str | None = None
    isolation: str | None = None
    collection: str | None = None
    exported_at: datetime | None = None
    claims: list[ClaimRecord] = Field(default_factory=list)

    @field_validator("memory")
    @classmethod
    def _has_owner_prefix(cls, value: str) -> str:
        owner_role(value)
        return value

    @field_validator("created_at", "exported_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    @field_validator("conversation")
    @classmethod
    def _conversation_format(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.removeprefix("conv:")
        if not (_DATE_CONV.fullmatch(value) or _CHAPTER_CONV.fullmatch(value)):
            raise ValueError(f"conversation {value!r} is neither YYYY-MM-DD nor chNN")
        return value

    @field_validator("memory_type")
    @classmethod
    def _long_term(cls, value: MemoryType) -> MemoryType:
        if value is MemoryType.WORKING:
            raise ValueError("context memories are long-term; working memory is derived from them")
        return value

    @model_validator(mode="after")
    def _default_conversation(self) -> ContextRecord:
        if self.conversation is None:
            self.conversation = self.created_at.date().isoformat()
        return self


class ContextError(ValueError):
    """A record cannot be placed: its tenant config leaves the user, agent or scene unknown."""


@dataclass
class ContextRows:
    """A batch as parameter rows for the writer, one list per node/edge family, deduplicated."""

    characters: dict[str, dict[str, Any]] = field(default_factory=dict)
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    agents: dict[str, dict[str, Any]] = field(default_factory=dict)
    scenes: dict[str, dict[str, Any]] = field(default_factory=dict)
    conversations: dict[str, dict[str, Any]] = field(default_factory=dict)
    memories: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    claims: list[dict[str, Any]] = field(default_factory=list)

    @property
    def predicate_ids(self) -> list[str]:
        return sorted({claim["predicate_id"] for claim in self.claims})

    def memory_rows(self) -> list[dict[str, Any]]:
        """One row per (memory, context): the same text may come from several conversations."""
        return [row for key in sorted(self.memories) for row in self.memories[key]]


def _named(node_id: str, key: str, value: str, name: str | None = None) -> dict[str, Any]:
    return {"id": node_id, key: value, "name": name or value, "display": value}


def _character(ref: CharacterRef) -> dict[str, Any]:
    return {"id": f"char:{ref.id}", "character_id": ref.id, "name": ref.name or ref.id, "display": ref.id}


@dataclass(frozen=True)
class _Participants:
    user_id: str
    agent_id: str
    user_character: CharacterRef
    agent_character: CharacterRef

    def character(self, role: Role) -> CharacterRef:
        return self.user_character if role is Role.USER else self.agent_character

    def subject(self, role: Role) -> str:
        return f"user:{self.user_id}" if role is Role.USER else f"agent:{self.agent_id}"


def _participants(record: ContextRecord, profile: TenantContext) -> _Participants:
    user_id = record.user_id or profile.user_id
    agent_id = record.agent_id or profile.agent_id
    if not user_id or not agent_id:
        raise ContextError("user_id and agent_id are required (in the record or the tenant's context config)")
    return _Participants(
        user_id=user_id, agent_id=agent_id,
        user_character=record.user_character or profile.user_character or CharacterRef(id=user_id),
        agent_character=record.agent_character or profile.agent_character or CharacterRef(id=agent_id),
    )


def context_memory_id(tenant: str, record: ContextRecord) -> str:
    """The memtend id of a record's memory: the same node as a plain memory item with that text."""
    return memory_id(payload_hash(tenant, record.memory_type.value, record.memory))


def claim_id(claim: ClaimRecord, subject: str) -> str:
    return f"claim:{claim.predicate}|{claim.domain}|{subject}|tag:{id_token(claim.object)}"


def add_record(rows: ContextRows, tenant: str, record: ContextRecord, profile: TenantContext,
               now: datetime) -> None:
    """Add one record's nodes and edges; raises ContextError (leaving ``rows`` as it was)."""
    people = _participants(record, profile)
    scene = record.scene or profile.scene
    if not scene:
        raise ContextError("scene is required (in the record or the tenant's context config)")
    role = owner_role(record.memory)
    owner = people.character(role)
    for ref in (people.user_character, people.agent_character):
        rows.characters[f"char:{ref.id}"] = _character(ref)
    rows.users[f"user:{people.user_id}"] = _named(f"user:{people.user_id}", "user_id", people.user_id)
    rows.agents[f"agent:{people.agent_id}"] = {
        **_named(f"agent:{people.agent_id}", "agent_id", people.agent_id),
        "character": f"char:{people.agent_character.id}",
    }
    rows.scenes[f"scene:{scene}"] = _named(f"scene:{scene}", "scene_id", scene)
    conv_id = f"conv:{record.conversation}"
    rows.conversations[conv_id] = _named(conv_id, "conv_id", record.conversation or "")

    mem_id = context_memory_id(tenant, record)
    rows.memories.setdefault(mem_id, []).append({
        "id": mem_id, "owner": f"char:{owner.id}", "scene": f"scene:{scene}",
        "conversation": conv_id,
        "point_id": record.point_id or str(uuid.uuid5(uuid.NAMESPACE_URL, f"memtend:{tenant}:{mem_id}")),
        "isolation": record.isolation or profile.isolation,
        "collection": record.collection or profile.collection,
        "exported_at": record.exported_at or now,
    })
    for claim in record.claims:
        about = claim.about or role
        character = people.character(about)
        domain_id = f"dom:char:{character.id}:{claim.domain}"
        predicate_id = f"pred:char:{character.id}:{claim.domain}:{claim.predicate}"
        label = f"{claim.predicate} ({claim.domain})"
        topic = id_token(claim.topic) if claim.topic else None
        rows.claims.append({
            "id": claim_id(claim, people.subject(about)),
            "character": f"char:{character.id}",
            "memory": mem_id,
            "domain_id": domain_id,
            "domain": {"domain": claim.domain, "character_id": character.id,
                       "name": claim.domain, "display": claim.domain},
            "predicate_id": predicate_id,
            "predicate": {"predicate": claim.predicate, "domain": claim.domain,
                          "character_id": character.id, "name": label, "display": label},
            "props": {"predicate": claim.predicate, "domain": claim.domain, "status": claim.status,
                      "confidence": claim.confidence, "name": label, "display": label,
                      "object": claim.object, "subject": people.subject(about),
                      "character_id": character.id, "observed_at": record.created_at},
            "topic": None if topic is None else {
                "id": f"topic:{topic}", "topic": claim.topic, "name": claim.topic, "display": topic},
        })


def build_rows(tenant: str, records: list[ContextRecord], profile: TenantContext,
               now: datetime) -> ContextRows:
    """Everything a batch writes, keyed by node id so each node appears once per batch."""
    rows = ContextRows()
    for record in records:
        add_record(rows, tenant, record, profile, now)
    return rows
