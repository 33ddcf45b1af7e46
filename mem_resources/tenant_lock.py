"""One writer per tenant at a time, whoever writes: a lease in Neo4j.

The run queue's per-tenant limit only sees runs the daemon launches; ``memtend tend``, the
lifecycle commands and runs launched by hand bypass it. So every writer takes the tenant's lease:
a partitioned run when its Neo4j resource starts (held for the whole run in-process, for each
step in a step process), a backup, restore, drop or soft delete around its work. The lease is
re-entrant for one holder (a run's steps, a drop's own backup), renewed by a heartbeat while
held, and given up when every claim on it is released. A claim of a process that died on this
host is dropped at once; a claim from another host lapses when its lease is not renewed for
``ttl_s`` seconds.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import psutil

from mem_resources import memory_queries
from mem_resources.run_liveness import pid_alive
from mem_resources.settings import DEFAULT_TTL_S, DEFAULT_WAIT_S
from mem_resources.tenants import validate_tenant

if TYPE_CHECKING:
    from mem_resources.neo4j_resource import Neo4jResource

log = logging.getLogger(__name__)

#: Run tag naming the lease holder a run joins (``memtend tend`` sets it); else the run id.
LOCK_HOLDER_TAG = "memtend/lock_holder"


class TenantBusy(RuntimeError):
    """The tenant's lease stayed with another writer for longer than the wait allowed."""


@dataclass(frozen=True)
class Claim:
    """One process's share of a lease."""

    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    pid: int = field(default_factory=lambda: psutil.Process().pid)
    host: str = field(default_factory=socket.gethostname)
    started: float = field(default_factory=lambda: psutil.Process().create_time())

    def encode(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def decode(cls, text: str) -> Claim | None:
        try:
            return cls(**json.loads(text))
        except (ValueError, TypeError):
            return None


def _kept(claims: list[str], expired: bool) -> list[str]:
    """Claims still standing: a live process of this host, or an unexpired one of another host."""
    kept = []
    for text in claims:
        claim = Claim.decode(text)
        alive = pid_alive(claim.pid, claim.host, claim.started) if claim else None
        if alive or (alive is None and not expired):
            kept.append(text)
    return kept


class TenantLease:
    """Hold ``tenant``'s lease as ``holder`` inside a ``with`` block (waits up to ``wait_s``)."""

    def __init__(self, neo4j: Neo4jResource, tenant: str, holder: str | None = None, *,
                 info: str = "", ttl_s: float = DEFAULT_TTL_S, wait_s: float = DEFAULT_WAIT_S,
                 on_wait: Callable[[str], Any] | None = None) -> None:
        self.neo4j, self.tenant = neo4j, validate_tenant(tenant)
        self.holder = holder or uuid.uuid4().hex
        self.info, self.ttl_s, self.wait_s = info or f"holder {self.holder}", ttl_s, wait_s
        self.on_wait = on_wait or log.warning
        self.claim = Claim()
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    def _try(self, tx: Any) -> str | None:
        """Take a claim if the lease is free or ours; else who holds it."""
        state = memory_queries.lock_tenant_lease(tx, self.tenant)
        claims = _kept(state["claims"], state["expired"])
        free = not claims
        if free or state["holder"] == self.holder:
            memory_queries.write_tenant_lease(tx, self.tenant, self.holder, [*claims, self.claim.encode()],
                                              self.info if free else state["info"], self.ttl_s, free)
            return None
        if claims != state["claims"]:
            memory_queries.write_tenant_lease(tx, self.tenant, state["holder"], claims, state["info"],
                                              self.ttl_s, False)
        return f"{state['info']} (since {state['since']})"

    def acquire(self) -> Self:
        deadline, pause, told = time.monotonic() + self.wait_s, 0.2, False
        while True:
            with self.neo4j.session() as session:
                busy = session.execute_write(self._try)
            if busy is None:
                break
            if time.monotonic() >= deadline:
                raise TenantBusy(f"tenant {self.tenant!r} is being written by {busy}; gave up after "
                                 f"{self.wait_s:.0f} s")
            if not told:
                self.on_wait(f"tenant {self.tenant!r} is being written by {busy}; waiting")
                told = True
            time.sleep(pause)
            pause = min(pause * 2, 2.0)
        self._stop.clear()
        self._heartbeat = threading.Thread(target=self._renew, name=f"lease-{self.tenant}", daemon=True)
        self._heartbeat.start()
        return self

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl_s / 4):
            try:
                with self.neo4j.session() as session:
                    if not session.execute_write(memory_queries.renew_tenant_lease, self.tenant,
                                                 self.holder, self.claim.encode(), self.ttl_s):
                        log.error("lost the lease of tenant %r (not renewed for %.0f s)",
                                  self.tenant, self.ttl_s)
            except Exception:  # a missed beat is retried; the lease outlives ttl_s/4
                log.warning("renewing the lease of tenant %r failed", self.tenant, exc_info=True)

    def _give_back(self, tx: Any) -> None:
        state = memory_queries.lock_tenant_lease(tx, self.tenant)
        if state["holder"] != self.holder:
            return
        claims = [c for c in _kept(state["claims"], state["expired"]) if c != self.claim.encode()]
        memory_queries.write_tenant_lease(tx, self.tenant, self.holder, claims, state["info"],
                                          self.ttl_s, False)

    def release(self) -> None:
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
            self._heartbeat = None
        with self.neo4j.session() as session:
            session.execute_write(self._give_back)

    def __enter__(self) -> Self:
        return self.acquire()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.release()


class TenantIncomplete(RuntimeError):
    """An undo or restore of the tenant stopped midway: its graph is half given back."""


@contextmanager
def incomplete_operation(neo4j: Neo4jResource, tenant: str, finish: str, enabled: bool = True) -> Iterator[None]:
    """Mark the tenant incomplete around an operation that spans transactions (an undo of a
    run, a restore): killed midway, the mark stays and names ``finish``, the command that
    completes it. Cleared only when the block ends without an error."""
    if not enabled:
        yield
        return
    with neo4j.session() as session:
        session.execute_write(memory_queries.mark_incomplete, tenant, finish)
    yield
    with neo4j.session() as session:
        session.execute_write(memory_queries.clear_incomplete, tenant)


def refuse_if_incomplete(neo4j: Neo4jResource, tenant: str) -> None:
    """Raise ``TenantIncomplete`` naming the finishing command when the tenant is marked."""
    with neo4j.session() as session:
        state = session.execute_read(memory_queries.incomplete_operation, tenant)
    if state:
        raise TenantIncomplete(f"tenant {tenant!r} is incomplete: an undo or restore stopped midway "
                               f"(since {state['since']}); run `{state['command']}` to finish it first")
