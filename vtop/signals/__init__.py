"""Canonical vLLM signals: the catalog of names across versions, the parser, the store."""
