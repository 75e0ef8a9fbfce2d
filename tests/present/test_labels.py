"""Short labels of retrievers and hybrids (pmrag.present.labels.short_label), shared by the inspector and figures."""

import matplotlib.pyplot
import pandas as pd
import pytest

from pmrag.core.names import HybridId, RetrieverId
from pmrag.present import plots
from pmrag.present.labels import short_label


def test_short_label_of_retriever_and_hybrid_names():
    assert short_label("raw_text_bm25") == "raw·bm25"
    assert short_label("embedding_text_vector") == "emb·vec"
    assert short_label("raw_text_bm25_sudachi") == "raw·bm25·sudachi"
    assert short_label("hybrid:raw_text_bm25+embedding_text_vector@0.35") == "raw·bm25 + emb·vec β=.35"
    assert short_label("hybrid:summary_bm25+summary_vector@0.5") == "sum·bm25 + sum·vec β=.50"
    assert short_label("hybrid:summary_bm25+summary_vector@1") == "sum·bm25 + sum·vec β=1.00"
    assert short_label("hybrid:raw_text_bm25+raw_text_vector@0.005") == "raw·bm25 + raw·vec β=.005"
    assert short_label("my_run") == "my_run"  # not a retriever name: unchanged


def test_short_label_of_typed_ids_other_words_and_other_fusions():
    first, second = RetrieverId("summary_excerpt", "bm25"), RetrieverId("raw_text", "vector", "e5")
    assert short_label(first) == "summary_excerpt·bm25"  # no shorter spelling: kept
    assert short_label(second) == "raw·vec·e5"
    assert short_label(HybridId(first, second, 0.25)) == "summary_excerpt·bm25 + raw·vec·e5 β=.25"
    assert short_label("hybrid-rrf:raw_text_bm25+raw_text_vector@0.50") == "raw·bm25 + raw·vec rrf β=.50"
    assert short_label("hybrid-minmax:raw_text_bm25+raw_text_vector@0.50") == (  # refused spelling: unchanged
        "hybrid-minmax:raw_text_bm25+raw_text_vector@0.50")


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_hybrid_sweep_legend_names_each_pairing_by_its_short_labels():
    macro = pd.DataFrame({"bm25": ["summary_bm25"] * 2 + ["raw_text_bm25"] * 2,
                          "vector": ["embedding_text_vector"] * 2 + ["raw_text_vector"] * 2,
                          "beta": [0.0, 1.0] * 2, "recall@5": [0.1, 0.2, 0.3, 0.4]})
    fig = plots.hybrid_sweep_figure(macro)
    legend = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    assert legend == ["sum·bm25 + emb·vec", "raw·bm25 + raw·vec"]
    matplotlib.pyplot.close(fig)
    fig = plots.hybrid_sweep_figure(macro, pairings=[("raw_text_bm25", "raw_text_vector")])   # the selection's only
    assert [text.get_text() for text in fig.axes[0].get_legend().get_texts()] == ["raw·bm25 + raw·vec"]
    matplotlib.pyplot.close(fig)


def test_only_retrievers_of_a_representation_without_chat_text_are_blind_by_design():
    from pmrag.present.labels import blind_by_design

    assert blind_by_design("prefix_bm25") and blind_by_design("prefix_vector")
    assert not blind_by_design("summary_excerpt_bm25") and not blind_by_design("embedding_text_vector")
    assert not blind_by_design("hybrid:raw_text_bm25+summary_vector@0.60") and not blind_by_design("not a name")
