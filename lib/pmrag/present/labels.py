"""Short labels of retrievers and hybrids for narrow places: figure legends and the inspector's gold matrix.

One rule for every view, so a configuration reads the same in a figure and in the inspector; the full name
(:mod:`pmrag.core.names`) stays where there is room for it (tables, the inspector's hover ``title``).
"""

from __future__ import annotations

from pmrag.core.names import PAPER_FUSION, HybridId, InvalidName, RetrieverId, format_beta, parse_method
from pmrag.retrieve.registry import RETRIEVERS

# representations that have a shorter spelling (a method's is its component's ``label``); any other is kept
REPRESENTATION_LABELS = {"raw_text": "raw", "summary": "sum", "embedding_text": "emb"}


def method_label(method: str) -> str:
    """A method's short label: its registered component's ``label`` (``vector`` → ``vec``), else the method."""
    return RETRIEVERS.get(method).label if method in RETRIEVERS else method


def short_label(name: str | RetrieverId | HybridId) -> str:
    """A short label for a retriever or hybrid, its parts joined by ``·``.

    A retriever's representation is abbreviated by :data:`REPRESENTATION_LABELS`, its method by its component's
    label (:func:`method_label`), and a variant is kept:
    ``raw_text_bm25_sudachi`` → ``raw·bm25·sudachi``, ``embedding_text_vector`` → ``emb·vec``.  A hybrid is
    its two retrievers, the fusion when it is not the paper's min–max fusion, and β without the leading zero:
    ``hybrid:raw_text_bm25+embedding_text_vector@0.35`` → ``raw·bm25 + emb·vec β=.35``,
    ``hybrid-rrf:…@0.35`` → ``raw·bm25 + emb·vec rrf β=.35``.  A string that is neither name is returned
    unchanged.

    Parameters
    ----------
    name : a :class:`~pmrag.core.names.RetrieverId`, a :class:`~pmrag.core.names.HybridId` or either's name.

    Returns
    -------
    str
    """
    try:
        method = name if isinstance(name, (RetrieverId, HybridId)) else parse_method(str(name))
    except InvalidName:
        return str(name)
    if isinstance(method, HybridId):
        fusion = "" if method.fusion == PAPER_FUSION else f" {method.fusion}"
        beta = format_beta(method.beta).removeprefix("0")
        return f"{short_label(method.first)} + {short_label(method.second)}{fusion} β={beta}"
    parts = (REPRESENTATION_LABELS.get(method.representation, method.representation), method_label(method.method),
             method.variant)
    return "·".join(part for part in parts if part)


# representations that hold no chat text: embedding_text's prefix is the template's fixed sentence, the same for every
# chunk, so a retriever over it sees no evidence by design (an ablation's floor, not a loss)
BLIND_REPRESENTATIONS = ("prefix",)


def blind_by_design(name) -> bool:
    """Whether a retriever (or its name) scores a representation with no chat text (:data:`BLIND_REPRESENTATIONS`):
    it sees no evidence by design.  Hybrids and anything that is not a retriever's name are not."""
    try:
        method = parse_method(str(name))
    except InvalidName:
        return False
    return isinstance(method, RetrieverId) and method.representation in BLIND_REPRESENTATIONS
