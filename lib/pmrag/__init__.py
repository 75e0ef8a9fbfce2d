"""pmrag: the Personal Memory RAG retrieval workbench (helper package for the numbered notebooks)."""

__version__ = "0.1.0"
