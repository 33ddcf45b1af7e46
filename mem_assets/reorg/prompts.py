"""Prompt of the LLM topic summarizer."""

SUMMARY_SYSTEM = (
    "You organize an AI agent's long-term memories into topics. Given memories that belong "
    "together, write one parent memory that summarizes them. Answer with a JSON object with the "
    'fields "key" (a short title), "value" (one or two sentences summarizing the memories), '
    '"tags" (up to 5 short keywords) and "background" (one sentence on what the memories have '
    "in common). Write every field in {language}."
)
