"""Resources built from the one ``Settings``: offline defaults, OpenAI-compatible when asked.

Connection fields (Neo4j URI, user, password, database; LLM endpoint, key, model) that come from
the environment are handed to Dagster as ``EnvVar``s: the UI and run config show the variable's
name, never its value, and each run process (a Kubernetes pod, a worker on another host) reads it
from its own environment, so one image serves every deployment. Everything else is a plain value.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from mem_assets.context_graph.resources import ContextProfiles
from mem_assets.dedup.pair_judge import JudgeResource, OfflineJudge, OpenAIJudge, RoutedJudge
from mem_assets.ingest.inbox import InboxResource
from mem_assets.lifecycle.backup_storage import BackupStorage
from mem_assets.reorg.llm_placement import LLMPlacer, OfflinePlacer, TopicPlacerResource
from mem_assets.reorg.summarizers import (
    ExtractiveSummarizer,
    LLMSummarizer,
    SummarizerResource,
)
from mem_assets.reorg.topic_vectors import TopicVectorsResource
from mem_resources.embedder import (
    EmbedderResource,
    HashingEmbedder,
    OpenAIEmbedder,
    WordLlamaEmbedder,
)
from mem_resources.llm import OpenAIChatResource
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.settings import Settings
from mem_resources.table_io import TableIOManager, table_base


def _env_or(settings: Settings, field: str, value: Any, in_dagster: bool = True) -> Any:
    """``EnvVar`` of the variable ``field`` was read from, else ``value`` (a default, or a value
    set in code, e.g. by a test). Outside Dagster nothing resolves an ``EnvVar``: the value."""
    name = settings.env_source(field) if in_dagster else None
    return dg.EnvVar(name) if name else value


def _api_key(settings: Settings, in_dagster: bool) -> str | dg.EnvVar:
    """An ``EnvVar`` for Dagster (never shown in the UI); the plain value for direct use (CLI)."""
    if settings.openai_api_key is None:
        return "not-needed"
    return dg.EnvVar("OPENAI_API_KEY") if in_dagster else settings.openai_api_key.get_secret_value()


def build_neo4j(settings: Settings) -> Neo4jResource:
    """Like ``Neo4jResource.from_settings``, with environment-sourced fields as ``EnvVar``s."""
    resource = Neo4jResource.from_settings(settings)
    return Neo4jResource(
        uri=_env_or(settings, "neo4j_uri", resource.uri),
        user=_env_or(settings, "neo4j_user", resource.user),
        password=_env_or(settings, "neo4j_password", resource.password),
        database=_env_or(settings, "neo4j_database", resource.database),
        embedding_dimension=resource.embedding_dimension,
        tenant_lock_ttl_s=resource.tenant_lock_ttl_s,
        tenant_lock_wait_s=resource.tenant_lock_wait_s,
        graph_schema=resource.graph_schema,
        memos_shared_embedding=resource.memos_shared_embedding,
    )


def build_embedder(settings: Settings, in_dagster: bool = True) -> EmbedderResource:
    if settings.embedder == "openai":
        return OpenAIEmbedder(
            dimension=settings.dimension,
            model=_env_or(settings, "embedding_model", settings.embedding_model, in_dagster),
            base_url=_env_or(settings, "openai_base_url", settings.openai_base_url, in_dagster),
            api_key=_api_key(settings, in_dagster),
            timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
        )
    if settings.embedder == "hashing":
        return HashingEmbedder(dimension=settings.dimension)
    return WordLlamaEmbedder(dimension=settings.dimension)


def build_chat(settings: Settings, in_dagster: bool = True) -> OpenAIChatResource:
    return OpenAIChatResource(
        model=_env_or(settings, "llm_model", settings.llm_model, in_dagster),
        base_url=_env_or(settings, "openai_base_url", settings.openai_base_url, in_dagster),
        api_key=_api_key(settings, in_dagster),
        timeout_s=settings.llm_timeout_s,
        max_retries=settings.llm_max_retries,
        response_format=settings.llm_response_format,
        max_tokens=settings.llm_max_tokens,
    )


def build_judge(settings: Settings, in_dagster: bool = True) -> JudgeResource:
    """Offline; with ``MEMTEND_LLM=openai`` the offline judge routing its uncertain pairs to the
    LLM (its near bands ``MEMTEND_LLM_NEAR_MERGES`` / ``_SUPERSEDES``), or
    (``MEMTEND_LLM_ROUTE=all``) the LLM alone. With an LLM the offline cascade has no middle stage
    (``MEMTEND_JUDGE_MIDDLE`` or not): the confirmation reach was chosen on the accurate stage's
    probabilities."""
    routed = settings.llm == "openai" and settings.llm_route == "uncertain"
    offline = OfflineJudge(model=settings.offline_judge, gate=settings.judge_gate,
                           middle=settings.judge_middle and settings.llm != "openai",
                           models_dir=str(settings.models_dir), review_band=settings.review_band,
                           near_merges=settings.llm_near_merges if routed else None,
                           near_supersedes=settings.llm_near_supersedes if routed else None,
                           confirm_merges=settings.llm_confirm_merges,
                           confirm_supersedes=settings.llm_confirm_supersedes)
    if settings.llm != "openai":
        return offline
    llm = OpenAIJudge(chat=build_chat(settings, in_dagster), max_concurrency=settings.judge_concurrency,
                      memories_per_call=settings.llm_judge_memories_per_call,
                      deadline_s=settings.judge_deadline_s, max_calls_per_run=settings.llm_max_calls_per_run,
                      max_tokens_per_run=settings.llm_max_tokens_per_run)
    return llm if settings.llm_route == "all" else RoutedJudge(offline=offline, llm=llm,
                                                                 restatements=settings.llm_restatements,
                                                                 near_carried=settings.llm_near_carried)


def build_summarizer(settings: Settings) -> SummarizerResource:
    """Topic summaries by the chat model with ``MEMTEND_LLM=openai``, under the same per-run
    limits as the judge and placement (counted apart), else extractive (offline)."""
    if settings.llm == "openai":
        return LLMSummarizer(chat=build_chat(settings), max_calls_per_run=settings.llm_max_calls_per_run,
                             max_tokens_per_run=settings.llm_max_tokens_per_run,
                             topics_per_call=settings.topic_llm_names_per_call)
    return ExtractiveSummarizer()


def build_topic_placer(settings: Settings, in_dagster: bool = True) -> TopicPlacerResource:
    """With ``MEMTEND_LLM=openai`` the chat model places the memories offline placement is unsure
    of, under the same per-run limits as the judge; else offline placement alone."""
    if settings.llm != "openai":
        return OfflinePlacer()
    return LLMPlacer(chat=build_chat(settings, in_dagster), band=settings.topic_llm_band,
                     group_band=settings.topic_llm_group_band, topics=settings.topic_llm_topics,
                     batch_size=settings.topic_llm_batch, max_calls_per_run=settings.llm_max_calls_per_run,
                     max_tokens_per_run=settings.llm_max_tokens_per_run)


def build_topic_vectors(settings: Settings) -> TopicVectorsResource:
    return TopicVectorsResource(e5_languages=settings.e5_languages, combined_languages=settings.combined_languages,
                                cross_language=settings.topic_cross_language, thresholds_file=settings.topic_thresholds)


def build_resources(settings: Settings) -> dict[str, Any]:
    """``tables`` is the step-output store again, for jobs that clean it (drop tenant)."""
    tables = TableIOManager(base_path=table_base(settings))
    return {
        "neo4j": build_neo4j(settings),
        "embedder": build_embedder(settings),
        "judge": build_judge(settings),
        "inbox": InboxResource(root=settings.inbox, quarantine_dir=settings.quarantine),
        "summarizer": build_summarizer(settings),
        "topic_placer": build_topic_placer(settings),
        "topic_vectors": build_topic_vectors(settings),
        "backups": BackupStorage(root=settings.backup_dir),
        "context_profiles": ContextProfiles(config_file=settings.context_config or ""),
        "io_manager": tables,
        "tables": tables,
    }

