import dagster as dg

#: One partition per tenant; the partition key is the ``user_name`` on every node.
tenant_partitions = dg.DynamicPartitionsDefinition(name="tenants")
