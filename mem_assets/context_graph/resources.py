"""Per-tenant context profiles (user/agent/character ids, single-valued predicates)."""

from __future__ import annotations

from pathlib import Path

from dagster import ConfigurableResource

from mem_assets.context_graph.records import ContextConfig


class ContextProfiles(ConfigurableResource):
    """The JSON config file of ``MEMTEND_CONTEXT_CONFIG``; empty: records carry their own ids."""

    config_file: str = ""

    def load(self) -> ContextConfig:
        """Read at each run, so an edited file counts from the next run on."""
        if not self.config_file:
            return ContextConfig()
        return ContextConfig.model_validate_json(Path(self.config_file).read_text(encoding="utf-8"))
