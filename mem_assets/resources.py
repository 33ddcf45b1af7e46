"""Resources chosen from the environment: offline defaults, OpenAI-compatible when asked."""

import os
from typing import Any

from mem_resources import env_config
from mem_resources.backup_storage import BackupStorage, backup_dir_from_env
from mem_resources.embedder import EmbedderResource, HashingEmbedder
from mem_resources.inbox import InboxResource
from mem_resources.judges import JudgeResource, OfflineJudge, OpenAIJudge
from mem_resources.llm import OpenAIChatResource
from mem_resources.local_neo4j import LocalNeo4jSettings
from mem_resources.summarizers import ExtractiveSummarizer, LLMSummarizer, SummarizerResource


def uses_openai(kind: str) -> bool:
    """``MEMTEND_EMBEDDER`` / ``MEMTEND_LLM`` = ``openai`` switches a provider from offline."""
    return os.environ.get(f"MEMTEND_{kind}", "offline").lower() == "openai"


def embedding_dimension() -> int:
    return int(os.environ.get("MEMTEND_EMBEDDING_DIM", "384"))


def build_embedder() -> EmbedderResource:
    if uses_openai("EMBEDDER"):
        return env_config.openai_embedder(os.environ, embedding_dimension())
    return HashingEmbedder(dimension=embedding_dimension())


def build_chat() -> OpenAIChatResource:
    return env_config.chat_resource(os.environ)


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
        "neo4j": env_config.neo4j_resource(os.environ, LocalNeo4jSettings.from_env().uri,
                                           embedding_dimension()),
        "embedder": build_embedder(),
        "judge": build_judge(),
        "inbox": InboxResource(
            root=os.environ.get("MEMTEND_INBOX", "data/inbox"),
            quarantine_dir=os.environ.get("MEMTEND_QUARANTINE", "data/quarantine"),
        ),
        "summarizer": build_summarizer(),
        "backups": BackupStorage(root=backup_dir_from_env()),
    }
