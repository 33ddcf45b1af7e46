"""Dagster resource owning the Neo4j driver and the constraints and indexes every query relies on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dagster import ConfigurableResource, InitResourceContext
from neo4j import Driver, GraphDatabase, NotificationDisabledClassification, Session
from pydantic import PrivateAttr

from mem_resources import constraints
from mem_resources.graph_schema_adapter import DialectSession, GraphDialect, GraphSchema
from mem_resources.local_servers.neo4j import LocalNeo4jSettings, up
from mem_resources.settings import DEFAULT_DIMENSIONS, DEFAULT_TTL_S, DEFAULT_WAIT_S, Settings
from mem_resources.tenant_lock import LOCK_HOLDER_TAG, TenantIncomplete, TenantLease, refuse_if_incomplete
from mem_resources.tenants import is_valid_tenant

PARTITION_TAG = "dagster/partition"


class Neo4jResource(ConfigurableResource):
    """Bolt connection to the memory graph. Empty ``user`` means no authentication.

    In a run of one tenant (a ``dagster/partition`` tag), the resource holds that tenant's write
    lease (:mod:`mem_resources.tenant_lock`) from setup to teardown: the whole run when it runs
    in-process, each step in a step process. Two runs of one tenant never write at once,
    whoever launched them.

    "Unrecognized" notifications (a property key or label no node has yet, normal on a young
    graph) are switched off at the driver; warnings that point at real problems still log."""

    uri: str
    user: str = ""
    password: str = ""
    database: str = "neo4j"
    embedding_dimension: int = DEFAULT_DIMENSIONS["offline"]
    tenant_lock_ttl_s: float = DEFAULT_TTL_S
    tenant_lock_wait_s: float = DEFAULT_WAIT_S
    graph_schema: str = GraphSchema.SEED_002.value
    memos_shared_embedding: bool = False

    _driver: Driver | None = PrivateAttr(default=None)
    _lease: TenantLease | None = PrivateAttr(default=None)

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
            tenant_lock_ttl_s=settings.tenant_lock_ttl_s,
            tenant_lock_wait_s=settings.tenant_lock_wait_s,
            graph_schema=settings.graph_schema.value,
            memos_shared_embedding=settings.memos_shared_embedding,
        )

    @property
    def dialect(self) -> GraphDialect:
        """The schema this deployment tends (seed 002, or MemOS's own graph)."""
        return GraphDialect(schema_name=GraphSchema(self.graph_schema),
                            shared_embedding=self.memos_shared_embedding)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._driver = None
        run = context.run
        tenant = run.tags.get(PARTITION_TAG) if run else None
        if run and tenant and is_valid_tenant(tenant):
            self._lease = self.lease(tenant, run.tags.get(LOCK_HOLDER_TAG) or run.run_id,
                                     info=f"Dagster run {run.run_id}",
                                     on_wait=context.log.warning if context.log else None).acquire()
            try:
                refuse_if_incomplete(self, tenant)
            except TenantIncomplete:
                self._lease.release()
                self._lease = None
                raise

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._lease is not None:
            self._lease.release()
            self._lease = None
        self.close()

    def lease(self, tenant: str, holder: str | None = None, **options: Any) -> TenantLease:
        """The tenant's write lease as ``holder`` (re-entrant); use it as a context manager."""
        return TenantLease(self, tenant, holder, ttl_s=self.tenant_lock_ttl_s,
                           wait_s=self.tenant_lock_wait_s, **options)

    def _connect(self) -> Driver:
        auth = (self.user, self.password) if self.user else None
        return GraphDatabase.driver(
            self.uri, auth=auth,
            notifications_disabled_classifications=[NotificationDisabledClassification.UNRECOGNIZED],
        )

    @property
    def driver(self) -> Driver:
        """The driver, created on first use together with the constraints and indexes (idempotent,
        ~0.1 s), so that no query ever runs against a graph without them."""
        if self._driver is None:
            driver = self._connect()
            try:
                with driver.session(database=self.database) as session:
                    constraints.ensure(session, self.embedding_dimension, self.dialect)
            except Exception:
                driver.close()
                raise
            self._driver = driver
        return self._driver

    def recreate_vector_index(self) -> bool:
        """Give the vector index this resource's dimension (the migration after switching
        embedders; ``memtend reembed`` then re-embeds the memories). True when it was rebuilt.
        Never on a MemOS graph: its vector index and ``embedding`` are MemOS's."""
        if self.dialect.memos:
            raise RuntimeError("a MemOS graph's vector index belongs to MemOS; memtend does not rebuild it")
        self.close()
        driver = self._connect()
        try:
            with driver.session(database=self.database) as session:
                return constraints.recreate_vector_index(session, self.embedding_dimension)
        finally:
            driver.close()

    def close(self) -> None:
        if self._driver is not None:
            self._driver.close()
            self._driver = None

    @contextmanager
    def session(self, **kwargs: Any) -> Iterator[Session]:
        """A session in this deployment's schema: on a MemOS graph, queries written against the
        seed-002 label are put in MemOS's (:class:`DialectSession`)."""
        dialect = self.dialect
        with self.driver.session(database=self.database, **kwargs) as session:
            yield DialectSession(session, dialect) if dialect.memos else session
