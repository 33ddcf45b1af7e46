"""Dagster resource owning the Neo4j driver and the schema every query relies on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dagster import ConfigurableResource, InitResourceContext
from neo4j import Driver, GraphDatabase, NotificationDisabledClassification, Session
from pydantic import PrivateAttr

from mem_resources import schema
from mem_resources.local_neo4j import LocalNeo4jSettings, up
from mem_resources.settings import DEFAULT_DIMENSIONS, Settings


class Neo4jResource(ConfigurableResource):
    """Bolt connection to the memory graph. Empty ``user`` means no authentication.

    "Unrecognized" notifications (a property key or label no node has yet, normal on a young
    graph) are switched off at the driver; warnings that point at real problems still log."""

    uri: str
    user: str = ""
    password: str = ""
    database: str = "neo4j"
    embedding_dimension: int = DEFAULT_DIMENSIONS["offline"]

    _driver: Driver | None = PrivateAttr(default=None)

    @classmethod
    def from_settings(cls, settings: Settings, start_local: bool = False) -> Neo4jResource:
        """The graph at ``NEO4J_URI``, else the local server (started first when ``start_local``).
        Definitions pass the password as an ``EnvVar`` instead, so the UI never shows it."""
        local = LocalNeo4jSettings.from_settings(settings)
        return cls(
            uri=settings.neo4j_uri or (up(local) if start_local else local.uri),
            user=settings.neo4j_user,
            password=settings.neo4j_password.get_secret_value(),
            database=settings.neo4j_database,
            embedding_dimension=settings.dimension,
        )

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._driver = None

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        self.close()

    def _connect(self) -> Driver:
        auth = (self.user, self.password) if self.user else None
        return GraphDatabase.driver(
            self.uri, auth=auth,
            notifications_disabled_classifications=[NotificationDisabledClassification.UNRECOGNIZED],
        )

    @property
    def driver(self) -> Driver:
        """The driver, created on first use together with the schema (idempotent, ~0.1 s), so
        that no query ever runs against a graph without its constraints and indexes."""
        if self._driver is None:
            driver = self._connect()
            try:
                with driver.session(database=self.database) as session:
                    schema.ensure(session, self.embedding_dimension)
            except Exception:
                driver.close()
                raise
            self._driver = driver
        return self._driver

    def recreate_vector_index(self) -> bool:
        """Give the vector index this resource's dimension (the migration after switching
        embedders; ``memtend reembed`` then re-embeds the memories). True when it was rebuilt."""
        self.close()
        driver = self._connect()
        try:
            with driver.session(database=self.database) as session:
                return schema.recreate_vector_index(session, self.embedding_dimension)
        finally:
            driver.close()

    def close(self) -> None:
        if self._driver is not None:
            self._driver.close()
            self._driver = None

    @contextmanager
    def session(self, **kwargs: Any) -> Iterator[Session]:
        with self.driver.session(database=self.database, **kwargs) as session:
            yield session
