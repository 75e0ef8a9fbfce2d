"""The retriever and tokenizer registries.  A new method is a class plus a registration; the study's
stages, tables, statistics and the inspector find it through ``retrieval.retrievers`` in the params."""

from __future__ import annotations

from pmrag.core.registry import Registry

RETRIEVERS: Registry = Registry("retriever method")
TOKENIZERS: Registry = Registry("tokenizer")

from pmrag.retrieve import retrievers, tokenizer  # noqa: E402,F401  (registers the built-in components)
