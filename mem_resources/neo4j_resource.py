"""Dagster resource owning the Neo4j driver and the schema every query relies on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dagster import ConfigurableResource, InitResourceContext
from neo4j import Driver, GraphDatabase, Session
from pydantic import PrivateAttr

from mem_resources.graph import schema


class Neo4jResource(ConfigurableResource):
    """Bolt connection to the memory graph. Empty ``user`` means no authentication."""

    uri: str
    user: str = ""
    password: str = ""
    database: str = "neo4j"
    embedding_dimension: int = 384

    _driver: Driver | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._driver = None

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        self.close()

    @property
    def driver(self) -> Driver:
        """The driver, created on first use together with the schema (idempotent, ~0.1 s), so
        that no query ever runs against a graph without its constraints and indexes."""
        if self._driver is None:
            auth = (self.user, self.password) if self.user else None
            driver = GraphDatabase.driver(self.uri, auth=auth)
            try:
                with driver.session(database=self.database) as session:
                    schema.ensure(session, self.embedding_dimension)
            except Exception:
                driver.close()
                raise
            self._driver = driver
        return self._driver

    def close(self) -> None:
        if self._driver is not None:
            self._driver.close()
            self._driver = None

    @contextmanager
    def session(self, **kwargs: Any) -> Iterator[Session]:
        with self.driver.session(database=self.database, **kwargs) as session:
            yield session
