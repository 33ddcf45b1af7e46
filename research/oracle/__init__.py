"""A local OpenAI-compatible oracle that answers memtend's LLM requests from labeled files."""
