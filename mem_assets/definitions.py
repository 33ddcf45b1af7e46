"""The memtend code location: every asset, check, sensor, schedule and job, in one Definitions."""

import os

import dagster as dg

from mem_assets.reorg.assets import memory_clusters, reorg_candidates, summary_parents
from mem_assets.reorg.checks import reorg_checks
from mem_assets.reorg.schedules import reorg_job, reorg_schedule
from mem_resources.embedder import HashingEmbedder
from mem_resources.llm import OpenAIChatResource
from mem_resources.local_neo4j import LocalNeo4jSettings
from mem_resources.neo4j_resource import Neo4jResource
from mem_resources.summarizers import ExtractiveSummarizer, LLMSummarizer, SummarizerResource


def build_summarizer() -> SummarizerResource:
    """``MEMTEND_SUMMARIZER=openai`` names topics with the chat model; the default is extractive."""
    if os.environ.get("MEMTEND_SUMMARIZER", "offline").lower() == "openai":
        return LLMSummarizer(chat=OpenAIChatResource(
            model=os.environ.get("MEMTEND_LLM_MODEL", "gpt-4o-mini"),
            base_url=os.environ.get("OPENAI_BASE_URL"),
            api_key=os.environ.get("OPENAI_API_KEY", "not-needed"),
        ))
    return ExtractiveSummarizer()


defs = dg.Definitions(
    assets=[reorg_candidates, memory_clusters, summary_parents],
    asset_checks=reorg_checks,
    schedules=[reorg_schedule],
    jobs=[reorg_job],
    resources={
        "neo4j": Neo4jResource(uri=os.environ.get("NEO4J_URI") or LocalNeo4jSettings.from_env().uri),
        "embedder": HashingEmbedder(),
        "summarizer": build_summarizer(),
    },
)
