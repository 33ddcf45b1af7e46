"""A domain's graph checks as one step: each check keeps its name, description and result in the
UI, but a run executes them together in one session instead of as a step each (eleven check steps
were a third of a small tenant's run overhead)."""

import inspect
from collections.abc import Callable, Collection, Iterator, Sequence

import dagster as dg
from neo4j import Session

from mem_resources import memory_queries
from mem_resources.metadata import offenders_result
from mem_resources.partitions import tenant_of, tenant_partitions

#: A check: (session, tenant, **resources it names) -> result. Its docstring is its description.
Check = Callable[..., dg.AssetCheckResult]


def checks_step(name: str, asset: dg.AssetsDefinition, checks: Sequence[Check],
                blocking: Collection[Check] = ()) -> dg.AssetChecksDefinition:
    """One partitioned step evaluating ``checks`` on ``asset`` (any subset can be run alone).
    Besides ``session`` and ``tenant``, a check's parameters name resources (``embedder``)."""
    by_name = {check.__name__: check for check in checks}
    extra = {check.__name__: list(inspect.signature(check).parameters)[2:] for check in checks}
    specs = [dg.AssetCheckSpec(check.__name__, asset=asset, description=inspect.getdoc(check),
                               blocking=check in blocking, partitions_def=tenant_partitions)
             for check in checks]

    @dg.multi_asset_check(name=name, specs=specs, can_subset=True,
                          required_resource_keys={"neo4j", *(r for names in extra.values() for r in names)})
    def _checks(context: dg.AssetCheckExecutionContext) -> Iterator[dg.AssetCheckResult]:
        tenant = tenant_of(context)
        with context.resources.neo4j.session() as session:
            for key in sorted(context.selected_asset_check_keys, key=lambda k: k.name):
                resources = {r: getattr(context.resources, r) for r in extra[key.name]}
                result = by_name[key.name](session, tenant, **resources)
                yield result._replace(check_name=key.name, asset_key=key.asset_key)

    return _checks


def topics_have_no_archived_members(session: Session, tenant: str) -> dg.AssetCheckResult:
    """No activated topic has a PARENT edge to an archived memory: archiving a member (merge,
    supersede, hygiene) moves its edge to the survivor or drops it. Both dedup and reorganization
    promise it, so both run it, dedup under its own name (``archived_left_their_topics``)."""
    return offenders_result(session.execute_read(memory_queries.topics_with_archived_members, tenant),
                            "activated topics point at archived members")
