import dagster as dg

from mem_resources.tenants import validate_tenant

#: One partition per tenant; the partition key is the ``user_name`` on every node.
tenant_partitions = dg.DynamicPartitionsDefinition(name="tenants")


def tenant_of(context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext) -> str:
    """The run's tenant: its partition key, refused unless a valid tenant name (partitions can be
    added by hand in the UI or API, where nothing else validates them)."""
    return validate_tenant(context.partition_key)
