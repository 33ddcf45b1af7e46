"""Resource config that names environment variables instead of holding their values.

A field given as ``dg.EnvVar("NEO4J_PASSWORD")`` is shown in the UI as that name, is never stored
in run config or the instance, and is read by each run worker from its own environment (a
Kubernetes secret, a systemd ``EnvironmentFile``), so one image serves every deployment. A
variable that is unset or empty falls back to the local default, so a laptop needs none of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

import dagster as dg

from mem_resources.embedder import OpenAIEmbedder
from mem_resources.llm import OpenAIChatResource
from mem_resources.neo4j_resource import Neo4jResource

T = TypeVar("T")

#: Variables a deployment sets; each maps to one resource field.
NEO4J_VARS = ("NEO4J_URI", "NEO4J_USER", "NEO4J_PASSWORD", "NEO4J_DATABASE")
LLM_VARS = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "MEMTEND_LLM_MODEL", "MEMTEND_EMBEDDING_MODEL")


def env_or(name: str, default: T, environ: Mapping[str, str]) -> dg.EnvVar | T:
    """``dg.EnvVar(name)`` when ``name`` is set (non-empty) in ``environ``, else ``default``."""
    return dg.EnvVar(name) if environ.get(name) else default


def neo4j_resource(environ: Mapping[str, str], default_uri: str,
                   embedding_dimension: int = 384) -> Neo4jResource:
    """The graph connection: ``NEO4J_URI``, ``NEO4J_USER``, ``NEO4J_PASSWORD``, ``NEO4J_DATABASE``."""
    return Neo4jResource(
        uri=env_or("NEO4J_URI", default_uri, environ),
        user=env_or("NEO4J_USER", "", environ),
        password=env_or("NEO4J_PASSWORD", "", environ),
        database=env_or("NEO4J_DATABASE", "neo4j", environ),
        embedding_dimension=embedding_dimension,
    )


def chat_resource(environ: Mapping[str, str]) -> OpenAIChatResource:
    """The chat model: ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``MEMTEND_LLM_MODEL``."""
    return OpenAIChatResource(
        model=env_or("MEMTEND_LLM_MODEL", "gpt-4o-mini", environ),
        base_url=env_or("OPENAI_BASE_URL", None, environ),
        api_key=env_or("OPENAI_API_KEY", "not-needed", environ),
    )


def openai_embedder(environ: Mapping[str, str], dimension: int) -> OpenAIEmbedder:
    """The embedding model: ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``MEMTEND_EMBEDDING_MODEL``."""
    return OpenAIEmbedder(
        dimension=dimension,
        model=env_or("MEMTEND_EMBEDDING_MODEL", "text-embedding-3-small", environ),
        base_url=env_or("OPENAI_BASE_URL", None, environ),
        api_key=dg.EnvVar("OPENAI_API_KEY"),
    )
