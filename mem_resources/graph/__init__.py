"""Cypher, one module per concern. Every memory query takes the tenant as ``$tenant``."""
