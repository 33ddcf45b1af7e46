"""The one place memtend reads its environment: a pydantic-settings object built once per process.

Definitions, every CLI command and the tests build their resources from a ``Settings``; no other
module reads ``os.environ``. Each field's environment variable is its alias (README lists them).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from mem_resources.graph_schema_adapter import GraphSchema

DEFAULT_BACKUP_DIR = "data/backups"
DEFAULT_TTL_S = 60.0
DEFAULT_WAIT_S = 3600.0
#: The review band: pairs the offline judge left independent whose P(redundant) or
#: P(contradictory) is at least that label's threshold minus this go to the review queue
#: (judge-v13's thresholds are 0.88 redundant, 0.64 contradictory: 0.30 takes P(redundant) >=
#: 0.58, P(contradictory) >= 0.34).
DEFAULT_REVIEW_BAND = 0.30
#: With an LLM configured, the offline judge's redundant (merges) or contradictory (supersedes)
#: decisions with P under t + reach × (1 − t) (a share of the room above the label's threshold t)
#: go to it for confirmation; 1: every merge and supersede it decides (not exact duplicates), so
#: no memory is archived on the offline judge's word alone. Chosen with an oracle on conversation
#: files and confirmed on an unseen one (research/studies/llm_route_rule.md, round 5).
DEFAULT_CONFIRM_MERGES = 1.0
DEFAULT_CONFIRM_SUPERSEDES = 1.0
#: With an LLM configured, the uncertain band below each threshold in place of the review band:
#: pairs left independent with P(redundant) >= 0.08 or P(contradictory) >= 0.24 go to it (real
#: conversations' missed repeats sit far under the redundant threshold). Same study, round 7:
#: affordable since a call carries several new memories.
DEFAULT_NEAR_MERGES = 0.80
DEFAULT_NEAR_SUPERSEDES = 0.40
#: Where, with an LLM, its "redundant" is taken over the offline judge's reading of a change: pairs
#: left independent nearest "contradictory", and contradictions whose newer memory says the fact
#: continues ("still …"). Round 7, confirmed on an unseen set (fresh10).
DEFAULT_RESTATEMENTS: Restatements = "continued"
#: With an LLM configured, a pair the offline judge left independent goes to it too when one memory
#: has at least this share of its words carried by the other ("has a ginger cat called Biltong" /
#: "'s ginger cat Biltong hid under the bed"): repeats with a detail more score as different facts.
#: Round 8 (research/studies/llm_route_rule.md), chosen on fresh6–10, confirmed on an unseen set.
DEFAULT_NEAR_CARRIED = 0.60
#: New memories one LLM judging call carries, each with its uncertain candidates: the system
#: prompt is paid once per call (calls per new memory / 4, tokens / 2.3; no decision changed with
#: the oracle, round 7).
DEFAULT_JUDGE_MEMORIES_PER_CALL = 4

#: Topic placement's routing (research/studies/topic_route_rule.md, chosen on the tuning sets):
#: with an LLM configured, a memory offline placement left unplaced, put in an existing topic not
#: its nearest or by a cosine margin under ``BAND`` over the best topic of another theme, or put in
#: a group made this run that it fits by a margin under ``GROUP_BAND`` over its best other option,
#: is placed by the LLM among its ``TOPICS`` nearest options.
DEFAULT_TOPIC_LLM_BAND = 0.30
DEFAULT_TOPIC_LLM_GROUP_BAND = 0.10
DEFAULT_TOPIC_LLM_TOPICS = 8

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODELS_DIR = PROJECT_ROOT / ".models"

Provider = Literal["offline", "openai"]
EmbedderKind = Literal["offline", "hashing", "openai"]
ResponseFormat = Literal["json_schema", "json_object", "none"]
LLMRoute = Literal["uncertain", "all"]
Restatements = Literal["none", "near", "continued", "decided"]
"""Where the LLM's "redundant" is taken on a pair the offline judge read as a change of value:
nowhere; on pairs it left independent nearest to "contradictory"; there and on its contradictory
decisions whose newer memory says the fact continues ("still …"); there and on all its
contradictory decisions (``pair_judge.weigh``)."""
#: Native vector sizes: the offline default (WordLlama) is 256, the hashing embedder 384.
DEFAULT_DIMENSIONS = {"offline": 256, "hashing": 384, "openai": 1536}


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


def _share(default: float, name: str, description: str) -> Any:
    """A setting between 0 and 1 (a band, a reach, a share) read from ``name``."""
    return Field(default=default, ge=0.0, le=1.0, validation_alias=_env(name), description=description)


class Settings(BaseSettings):
    """Everything configurable from the environment, with the defaults a laptop needs."""

    model_config = SettingsConfigDict(case_sensitive=False, extra="ignore", populate_by_name=True)

    neo4j_uri: str | None = Field(default=None, validation_alias=_env("NEO4J_URI"))
    neo4j_user: str = Field(default="", validation_alias=_env("NEO4J_USER"))
    neo4j_password: SecretStr = Field(default=SecretStr(""), validation_alias=_env("NEO4J_PASSWORD"))
    neo4j_database: str = Field(default="neo4j", validation_alias=_env("NEO4J_DATABASE"))

    local_neo4j_port: int = Field(default=7687, validation_alias=_env("MEMTEND_NEO4J_PORT"))
    local_neo4j_home: Path = Field(default=PROJECT_ROOT / ".neo4j",
                                   validation_alias=_env("MEMTEND_NEO4J_HOME"))
    local_neo4j_heap: str = Field(default="1g", validation_alias=_env("MEMTEND_NEO4J_HEAP"))
    local_neo4j_pagecache: str = Field(default="256m", validation_alias=_env("MEMTEND_NEO4J_PAGECACHE"))
    local_neo4j_start_timeout_s: float = Field(default=180.0,
                                               validation_alias=_env("MEMTEND_NEO4J_START_TIMEOUT"))

    graph_schema: GraphSchema = Field(
        default=GraphSchema.SEED_002, validation_alias=_env("MEMTEND_GRAPH_SCHEMA"),
        description="seed-002: memtend's own schema (:Node:MemoryItem); memos: tend a MemOS 2.x graph "
                    "in place (:Memory nodes, user_name tenants, MemOS's fields and edges).")
    memos_shared_embedding: bool = Field(
        default=False, validation_alias=_env("MEMTEND_MEMOS_SHARED_EMBEDDING"),
        description="memos schema: MemOS embeds with the model memtend is configured with, so dedup "
                    "candidates use MemOS's `embedding` and memory_vector_index (their dimension must "
                    "match); false: memtend keeps its own vector in `memtend_embedding`.")

    models_dir: Path = Field(default=DEFAULT_MODELS_DIR, validation_alias=_env("MEMTEND_MODELS_DIR"))
    """Where ``make setup`` puts the offline judge's bge-small model jars (mem_resources/bge.py)."""

    inbox: str = Field(default="data/inbox", validation_alias=_env("MEMTEND_INBOX"))
    quarantine: str = Field(default="data/quarantine", validation_alias=_env("MEMTEND_QUARANTINE"))
    backup_dir: str = Field(default=DEFAULT_BACKUP_DIR, validation_alias=_env("MEMTEND_BACKUP_DIR"))
    context_config: str | None = Field(default=None, validation_alias=_env("MEMTEND_CONTEXT_CONFIG"))

    embedder: EmbedderKind = Field(default="offline", validation_alias=_env("MEMTEND_EMBEDDER"))
    embedding_dim: int | None = Field(default=None, ge=1, validation_alias=_env("MEMTEND_EMBEDDING_DIM"))
    embedding_model: str = Field(default="text-embedding-3-small",
                                 validation_alias=_env("MEMTEND_EMBEDDING_MODEL"))
    llm: Provider = Field(default="offline", validation_alias=_env("MEMTEND_LLM"))
    llm_model: str = Field(default="gpt-4o-mini", validation_alias=_env("MEMTEND_LLM_MODEL"))
    openai_base_url: str | None = Field(default=None, validation_alias=_env("OPENAI_BASE_URL"))
    openai_api_key: SecretStr | None = Field(default=None, validation_alias=_env("OPENAI_API_KEY"))
    offline_judge: Literal["accurate", "fast"] = Field(
        default="accurate", validation_alias=_env("MEMTEND_OFFLINE_JUDGE"),
        description="accurate: pair model that also reads multilingual-e5 (~17 ms per distinct text); "
                    "fast: static word vectors only (~0.5 ms per pair, lower recall).")
    judge_gate: bool = Field(
        default=True, validation_alias=_env("MEMTEND_JUDGE_GATE"),
        description="accurate judge as a cascade: pairs the fast model calls clearly independent are answered "
                    "without e5; false: every model for every pair.")
    judge_middle: bool = Field(
        default=False, validation_alias=_env("MEMTEND_JUDGE_MIDDLE"),
        description="with the gate and no LLM: pairs the middle model (judge-mid-v1, e5 features) is sure of "
                    "are answered without bge-small and the cross-encoder (~19 % less judging time; "
                    "contradictory F1 0.827 -> 0.820 on hand-written held-out pairs).")
    topic_e5_languages: str = Field(
        default="none", validation_alias=_env("MEMTEND_TOPIC_E5_LANGUAGES"),
        description="Languages whose topics are placed in plain multilingual-e5-small space (each memory "
                    "embedded once with e5 and the topic encoders, ~25 ms, and the vectors stored on it) "
                    "instead of the embedder's: comma-separated, e.g. zh; 'none' (the default) for no language.")
    topic_combined_languages: str = Field(
        default="en,zh", validation_alias=_env("MEMTEND_TOPIC_COMBINED_LANGUAGES"),
        description="Languages whose topics are placed in their topic encoder's space: the vector of "
                    "bge-small-en (English) or bge-small-zh (Chinese) fine-tuned on labeled themes, with the "
                    "multilingual-e5-small one carried for cross-language offers (all kept on the memory, "
                    "made once, ~25 ms); comma-separated, e.g. en,zh; 'none' for no language. A language is "
                    "in at most one of this and MEMTEND_TOPIC_E5_LANGUAGES.")
    topic_cross_language: bool = Field(
        default=True, validation_alias=_env("MEMTEND_TOPIC_CROSS_LANGUAGE"),
        description="A memory that fits no topic of its own language may join the other language's "
                    "topic it fits in multilingual-e5 space (both languages must be in the e5 or "
                    "an encoder space); false: Chinese and English never share a topic.")
    topic_thresholds: str = Field(
        default="", validation_alias=_env("MEMTEND_TOPIC_THRESHOLDS"),
        description="A JSON file overriding the shipped placement thresholds per topic space in part "
                    "(same shape as mem_assets/reorg/models/placement-thresholds.json; e.g. for an "
                    "embedder other than WordLlama); empty: the shipped ones.")
    judge_concurrency: int = Field(default=4, ge=1, validation_alias=_env("MEMTEND_JUDGE_CONCURRENCY"))
    llm_timeout_s: float = Field(default=60.0, gt=0, validation_alias=_env("MEMTEND_LLM_TIMEOUT"),
                                 description="Seconds one LLM/embedding request may take.")
    llm_max_retries: int = Field(default=2, ge=0, validation_alias=_env("MEMTEND_LLM_MAX_RETRIES"),
                                 description="SDK retries on timeouts, 408/429/5xx and lost connections.")
    llm_response_format: ResponseFormat = Field(
        default="json_schema", validation_alias=_env("MEMTEND_LLM_RESPONSE_FORMAT"),
        description="json_schema, falling back on any refusal (a 4xx/5xx other than auth or overload) to "
                    "json_object with the schema (what llama.cpp servers constrain output with), then none.")
    llm_max_tokens: int = Field(
        default=1024, ge=16, validation_alias=_env("MEMTEND_LLM_MAX_TOKENS"),
        description="Completion tokens one LLM answer may take (max_tokens): a weak model cannot run on.")
    judge_deadline_s: float = Field(default=900.0, gt=0, validation_alias=_env("MEMTEND_JUDGE_DEADLINE"),
                                    description="Seconds of LLM judging per run; later nodes wait.")
    review_band: float = _share(
        DEFAULT_REVIEW_BAND, "MEMTEND_REVIEW_BAND",
        "The review band: pairs the offline judge left independent with P(redundant) or "
        "P(contradictory) >= threshold - band go to the review queue (`memtend review`); with "
        "an LLM routing the uncertain, MEMTEND_LLM_NEAR_MERGES / _SUPERSEDES take its place; 0: none.")
    llm_near_merges: float = _share(
        DEFAULT_NEAR_MERGES, "MEMTEND_LLM_NEAR_MERGES",
        "With MEMTEND_LLM_ROUTE=uncertain, in place of MEMTEND_REVIEW_BAND: pairs the offline judge "
        "left independent with P(redundant) >= threshold - this go to the LLM (it may confirm the "
        "merge or leave them apart); those still undecided go to the review queue.")
    llm_near_supersedes: float = _share(
        DEFAULT_NEAR_SUPERSEDES, "MEMTEND_LLM_NEAR_SUPERSEDES",
        "The same for P(contradictory) (supersedes).")
    llm_confirm_merges: float = _share(
        DEFAULT_CONFIRM_MERGES, "MEMTEND_LLM_CONFIRM_MERGES",
        "With MEMTEND_LLM_ROUTE=uncertain: the offline judge's redundant decisions with "
        "P < threshold + this * (1 - threshold) go to the LLM for confirmation (it may confirm "
        "them or settle them independent); 1: every one; 0: none.")
    llm_confirm_supersedes: float = _share(
        DEFAULT_CONFIRM_SUPERSEDES, "MEMTEND_LLM_CONFIRM_SUPERSEDES",
        "The same for the offline judge's contradictory decisions (supersedes).")
    llm_restatements: Restatements = Field(
        default=DEFAULT_RESTATEMENTS, validation_alias=_env("MEMTEND_LLM_RESTATEMENTS"),
        description="With MEMTEND_LLM_ROUTE=uncertain: where the LLM's \"redundant\" is taken on a pair the offline "
                    "judge read as a change: none; near (left independent nearest contradictory); continued (also a "
                    "decided contradiction whose newer memory says the fact continues: still, 仍…); decided (every "
                    "decided contradiction). The merge keeps every source's content; elsewhere two judges "
                    "disagreeing leave a pair apart.")
    llm_near_carried: float = _share(
        DEFAULT_NEAR_CARRIED, "MEMTEND_LLM_NEAR_CARRIED",
        "With MEMTEND_LLM_ROUTE=uncertain: a pair the offline judge left independent also goes to the "
        "LLM when one memory has at least this share of its content words carried by the other (it may "
        "confirm a repeat or leave the pair apart; events on different dates never go); 0: none.")
    llm_judge_memories_per_call: int = Field(
        default=DEFAULT_JUDGE_MEMORIES_PER_CALL, ge=1, validation_alias=_env("MEMTEND_LLM_JUDGE_MEMORIES_PER_CALL"),
        description="New memories, each with its candidates, one LLM judging call carries (never more candidates "
                    "than MEMTEND_LLM_MAX_TOKENS can answer, ~60 tokens each); 1: one call per new memory.")
    llm_route: LLMRoute = Field(
        default="uncertain", validation_alias=_env("MEMTEND_LLM_ROUTE"),
        description="With MEMTEND_LLM=openai: uncertain: the offline judge decides every pair and only "
                    "those in its uncertain bands (MEMTEND_LLM_NEAR_*, _CONFIRM_*) go to the LLM; all: the LLM "
                    "judges every pair (one call per new memory with candidates).")
    llm_max_calls_per_run: int = Field(
        default=1000, ge=0, validation_alias=_env("MEMTEND_LLM_MAX_CALLS_PER_RUN"),
        description="LLM calls one run of a tenant may make for judging, and as many (each counted apart) for "
                    "fusions, topic placement and topic names/summaries; the new memories (or groups to fuse) "
                    "beyond wait, unmerged and unchecked, for the next run; the uncertain memories beyond keep "
                    "their offline placement (or, unplaced, wait for the next run); the topics beyond keep their "
                    "offline name and are named by the next run; 0: no limit.")
    llm_max_tokens_per_run: int = Field(
        default=2_000_000, ge=0, validation_alias=_env("MEMTEND_LLM_MAX_TOKENS_PER_RUN"),
        description="Prompt + completion tokens the LLM judge may spend in one run of a tenant, and as "
                    "many (each counted apart) fusions, topic placement and topic names/summaries; no call "
                    "starts once they are spent (calls in flight finish); 0: no limit.")
    topic_llm_band: float = _share(
        DEFAULT_TOPIC_LLM_BAND, "MEMTEND_TOPIC_LLM_BAND",
        "With MEMTEND_LLM=openai: a memory that fits no existing topic, or that offline placement "
        "put in one not its nearest or by a cosine margin under this over another theme, is placed "
        "by the LLM among its nearest topics (or \"new\"); 0: only the memories no topic fits or "
        "placed off their nearest.")
    topic_llm_group_band: float = Field(
        default=DEFAULT_TOPIC_LLM_GROUP_BAND, ge=0.0, le=2.0, validation_alias=_env("MEMTEND_TOPIC_LLM_GROUP_BAND"),
        description="With MEMTEND_LLM=openai: a member of a group offline placement made this run that fits it "
                    "(without itself) by a cosine margin under this over its best other option (an existing "
                    "topic, another new group) is placed by the LLM: kept, moved, or set apart; 0: groups are "
                    "not checked.")
    topic_llm_topics: int = Field(
        default=DEFAULT_TOPIC_LLM_TOPICS, ge=1, validation_alias=_env("MEMTEND_TOPIC_LLM_TOPICS"),
        description="Nearest topics (and groups made this run) offered to the LLM per uncertain memory.")
    topic_llm_batch: int = Field(
        default=8, ge=1, validation_alias=_env("MEMTEND_TOPIC_LLM_BATCH"),
        description="Uncertain memories (of one memory type and language) asked about in one LLM call.")
    topic_llm_names_per_call: int = Field(
        default=6, ge=1, validation_alias=_env("MEMTEND_TOPIC_LLM_NAMES_PER_CALL"),
        description="Topics (of one language) named and summarized in one LLM call; fewer when "
                    "MEMTEND_LLM_MAX_TOKENS cannot hold that many answers (~160 tokens each).")

    tenant_lock_ttl_s: float = Field(
        default=DEFAULT_TTL_S, gt=0, validation_alias=_env("MEMTEND_TENANT_LOCK_TTL"),
        description="Seconds a tenant's write lease outlives its holder's last heartbeat.")
    tenant_lock_wait_s: float = Field(
        default=DEFAULT_WAIT_S, ge=0, validation_alias=_env("MEMTEND_TENANT_LOCK_WAIT"),
        description="Seconds a writer waits for another writer of the same tenant to finish.")

    automation: Literal["on", "off"] = Field(
        default="on", validation_alias=_env("MEMTEND_AUTOMATION", "MEMTEND_SENSORS"),
        description="off: sensors and schedules start stopped (a shared graph, a test instance).")
    dagster_home: str | None = Field(default=None, validation_alias=_env("DAGSTER_HOME"))
    io_base: str | None = Field(
        default=None, validation_alias=_env("MEMTEND_IO_BASE"),
        description="Where step outputs are stored: a folder or an fsspec URL (s3://…); "
                    "default <DAGSTER_HOME>/storage.")
    reorg_cron: str = Field(default="0 3 * * *", validation_alias=_env("MEMTEND_REORG_CRON"))
    executor: Literal["in_process", "multiprocess"] = Field(
        default="in_process", validation_alias=_env("MEMTEND_EXECUTOR"),
        description="in_process: a run's steps share one process (cheap; one tenant's steps run "
                    "one after another anyway); multiprocess: a process per step.")

    @field_validator("embedder", "llm", "graph_schema", "offline_judge", "automation", "executor",
                     "llm_response_format", "llm_route", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("topic_e5_languages", "topic_combined_languages")
    @classmethod
    def _language_list(cls, value: str) -> str:
        words = sorted({word.strip().lower() for word in value.split(",") if word.strip()} - {"none"})
        unknown = set(words) - {"en", "zh"}
        if unknown:
            raise ValueError(f"topic languages are en and/or zh, not {', '.join(sorted(unknown))}")
        return ",".join(words)

    @model_validator(mode="after")
    def _one_space_per_language(self) -> Settings:
        """A language named in MEMTEND_TOPIC_E5_LANGUAGES leaves the default encoder list; named in
        both lists by hand, it is an error."""
        both = sorted(set(self.e5_languages) & set(self.combined_languages))
        if both and "topic_combined_languages" not in self.model_fields_set:
            self.topic_combined_languages = ",".join(x for x in self.combined_languages if x not in both)
        elif both:
            raise ValueError(f"{', '.join(both)}: in both MEMTEND_TOPIC_E5_LANGUAGES and "
                             "MEMTEND_TOPIC_COMBINED_LANGUAGES, but a language has one topic space: "
                             "remove it from one of them")
        return self

    @property
    def e5_languages(self) -> list[str]:
        """The languages ``topic_e5_languages`` names (possibly none)."""
        return self.topic_e5_languages.split(",") if self.topic_e5_languages else []

    @property
    def combined_languages(self) -> list[str]:
        """The languages ``topic_combined_languages`` names (possibly none)."""
        return self.topic_combined_languages.split(",") if self.topic_combined_languages else []

    def with_topic_languages(self, e5: str | None = None, combined: str | None = None) -> Settings:
        """These settings with the topic-space lists replaced (None keeps the configured one); a
        language given only for e5 leaves the default encoder list, as it does from the environment."""
        chosen = {name: value for name, value in (("topic_e5_languages", e5), ("topic_combined_languages", combined))
                  if value is not None}
        return type(self).model_validate({**self.model_dump(exclude_unset=True), **chosen})

    @property
    def dimension(self) -> int:
        """The vector size: ``MEMTEND_EMBEDDING_DIM`` when set, else the embedder's own."""
        return self.embedding_dim or DEFAULT_DIMENSIONS[self.embedder]

    @property
    def automation_on(self) -> bool:
        return self.automation == "on"

    def env_source(self, field: str) -> str | None:
        """The environment variable that holds ``field``'s current (non-empty) value, if one does;
        resources hand that name to Dagster as an ``EnvVar`` instead of the value."""
        value = getattr(self, field)
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        if value is None or value == "":
            return None
        alias = type(self).model_fields[field].validation_alias
        names = {name.lower() for name in alias.choices} if isinstance(alias, AliasChoices) else set()
        return next((name for name, raw in os.environ.items()
                     if name.lower() in names and raw == str(value)), None)


def load_settings() -> Settings:
    """Read the environment once; callers pass the result down instead of reading it again."""
    return Settings()
