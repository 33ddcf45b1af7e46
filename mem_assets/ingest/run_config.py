"""Run config shared by the domains that write memories (ingest and the context graph)."""

import dagster as dg
from pydantic import Field


class WorkingMemoryConfig(dg.Config):
    """Both writers trim working memory with the same capacity, so it is defined once."""

    working_memory_capacity: int = Field(default=20, ge=0,
                                         description="Activated WorkingMemory nodes kept per tenant.")
