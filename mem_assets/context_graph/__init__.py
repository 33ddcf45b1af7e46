"""Seed 002's conversational context graph: ingest of realtime/offline records, schema export and diff."""
