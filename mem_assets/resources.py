"""Resources chosen from the environment: offline defaults, OpenAI-compatible when asked."""

import os
from typing import Any

import dagster as dg

from mem_resources.backup_storage import BackupStorage, backup_dir_from_env
from mem_resources.embedder import EmbedderResource, HashingEmbedder, OpenAIEmbedder
from mem_resources.inbox import InboxResource
from mem_resources.judges import JudgeResource, OfflineJudge, OpenAIJudge
from mem_resources.llm import OpenAIChatResource
from mem_resources.local_neo4j import LocalNeo4jSettings
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.summarizers import ExtractiveSummarizer, LLMSummarizer, SummarizerResource


def uses_openai(kind: str) -> bool:
    """``MEMTEND_EMBEDDER`` / ``MEMTEND_LLM`` = ``openai`` switches a provider from offline."""
    return os.environ.get(f"MEMTEND_{kind}", "offline").lower() == "openai"


def embedding_dimension() -> int:
    return int(os.environ.get("MEMTEND_EMBEDDING_DIM", "384"))


def build_embedder() -> EmbedderResource:
    if uses_openai("EMBEDDER"):
        return OpenAIEmbedder(
            dimension=embedding_dimension(),
            model=os.environ.get("MEMTEND_EMBEDDING_MODEL", "text-embedding-3-small"),
            base_url=os.environ.get("OPENAI_BASE_URL"),
            api_key=dg.EnvVar("OPENAI_API_KEY"),
        )
    return HashingEmbedder(dimension=embedding_dimension())


def build_chat() -> OpenAIChatResource:
    return OpenAIChatResource(
        model=os.environ.get("MEMTEND_LLM_MODEL", "gpt-4o-mini"),
        base_url=os.environ.get("OPENAI_BASE_URL"),
        api_key=dg.EnvVar("OPENAI_API_KEY") if "OPENAI_API_KEY" in os.environ else "not-needed",
    )


def build_judge() -> JudgeResource:
    if uses_openai("LLM"):
        return OpenAIJudge(chat=build_chat(),
                           max_concurrency=int(os.environ.get("MEMTEND_JUDGE_CONCURRENCY", "4")))
    return OfflineJudge()


def build_summarizer() -> SummarizerResource:
    """Topic summaries by the chat model when ``MEMTEND_LLM=openai``, else extractive (offline)."""
    return LLMSummarizer(chat=build_chat()) if uses_openai("LLM") else ExtractiveSummarizer()


def build_resources() -> dict[str, Any]:
    return {
        "neo4j": Neo4jResource(
            uri=os.environ.get("NEO4J_URI") or LocalNeo4jSettings.from_env().uri,
            user=os.environ.get("NEO4J_USER", ""),
            password=dg.EnvVar("NEO4J_PASSWORD") if "NEO4J_PASSWORD" in os.environ else "",
            database=os.environ.get("NEO4J_DATABASE", "neo4j"),
            embedding_dimension=embedding_dimension(),
        ),
        "embedder": build_embedder(),
        "judge": build_judge(),
        "inbox": InboxResource(
            root=os.environ.get("MEMTEND_INBOX", "data/inbox"),
            quarantine_dir=os.environ.get("MEMTEND_QUARANTINE", "data/quarantine"),
        ),
        "summarizer": build_summarizer(),
        "backups": BackupStorage(root=backup_dir_from_env()),
    }
