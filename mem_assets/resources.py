"""Resources built from the one ``Settings``: offline defaults, OpenAI-compatible when asked.

Secrets (Neo4j password, API key) are handed to Dagster as ``EnvVar``s so they never show in the
UI or in run config; everything else is a plain value read once by ``Settings``.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from mem_assets.context_graph.resources import ContextProfiles
from mem_assets.dedup.judges import JudgeResource, OfflineJudge, OpenAIJudge
from mem_assets.lifecycle.storage import BackupStorage
from mem_assets.reorg.summarizers import (
    ExtractiveSummarizer,
    LLMSummarizer,
    SummarizerResource,
)
from mem_resources.embedder import (
    EmbedderResource,
    HashingEmbedder,
    OpenAIEmbedder,
    WordLlamaEmbedder,
)
from mem_resources.inbox import InboxResource
from mem_resources.llm import OpenAIChatResource
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.settings import Settings


def _secret(env_name: str, present: bool) -> str | dg.EnvVar:
    return dg.EnvVar(env_name) if present else ""


def _api_key(settings: Settings, in_dagster: bool) -> str | dg.EnvVar:
    """An ``EnvVar`` for Dagster (never shown in the UI); the plain value for direct use (CLI)."""
    if settings.openai_api_key is None:
        return "not-needed"
    return dg.EnvVar("OPENAI_API_KEY") if in_dagster else settings.openai_api_key.get_secret_value()


def build_neo4j(settings: Settings) -> Neo4jResource:
    """Like ``Neo4jResource.from_settings``, with the password as an ``EnvVar``."""
    resource = Neo4jResource.from_settings(settings)
    password = _secret("NEO4J_PASSWORD", bool(settings.neo4j_password.get_secret_value()))
    return Neo4jResource(uri=resource.uri, user=resource.user, password=password,
                         database=resource.database, embedding_dimension=resource.embedding_dimension)


def build_embedder(settings: Settings, in_dagster: bool = True) -> EmbedderResource:
    if settings.embedder == "openai":
        return OpenAIEmbedder(
            dimension=settings.dimension,
            model=settings.embedding_model,
            base_url=settings.openai_base_url,
            api_key=_api_key(settings, in_dagster),
            timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
        )
    if settings.embedder == "hashing":
        return HashingEmbedder(dimension=settings.dimension)
    return WordLlamaEmbedder(dimension=settings.dimension)


def build_chat(settings: Settings, in_dagster: bool = True) -> OpenAIChatResource:
    return OpenAIChatResource(
        model=settings.llm_model,
        base_url=settings.openai_base_url,
        api_key=_api_key(settings, in_dagster),
        timeout_s=settings.llm_timeout_s,
        max_retries=settings.llm_max_retries,
        response_format=settings.llm_response_format,
    )


def build_judge(settings: Settings, in_dagster: bool = True) -> JudgeResource:
    if settings.llm == "openai":
        return OpenAIJudge(chat=build_chat(settings, in_dagster), max_concurrency=settings.judge_concurrency,
                           deadline_s=settings.judge_deadline_s)
    return OfflineJudge()


def build_summarizer(settings: Settings) -> SummarizerResource:
    """Topic summaries by the chat model with ``MEMTEND_LLM=openai``, else extractive (offline)."""
    if settings.llm == "openai":
        return LLMSummarizer(chat=build_chat(settings))
    return ExtractiveSummarizer()


def build_resources(settings: Settings) -> dict[str, Any]:
    return {
        "neo4j": build_neo4j(settings),
        "embedder": build_embedder(settings),
        "judge": build_judge(settings),
        "inbox": InboxResource(root=settings.inbox, quarantine_dir=settings.quarantine),
        "summarizer": build_summarizer(settings),
        "backups": BackupStorage(root=settings.backup_dir),
        "context_profiles": ContextProfiles(config_file=settings.context_config or ""),
    }
