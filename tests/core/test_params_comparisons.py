"""statistics.declared_comparisons (pmrag.core.params): refused on load with one line naming the key, and resolved
against the methods a study scores."""

import pytest

from pmrag.core.params import PAPER_COMPARISONS, StatisticsSection
from pmrag.study.params import load_params

from conftest import params_error as error_of, write_file as write

MINIMAL = "run: x\ndataset: {synthetic: {enabled: true}}\n"
SELECTED, DIAGNOSTIC = "hybrid:raw_text_bm25+summary_vector@0.60", "hybrid:summary_bm25+summary_vector@0.50"
ROLES = {"selected": SELECTED, "reference": "embedding_text_bm25", "diagnostic": DIAGNOSTIC}


@pytest.mark.parametrize(("value", "says"), [
    ("[[selected, nope]]", "'nope' is not a retriever name"),
    ("[[selected, raw_text_nope]]", "unknown retriever method 'nope'"),
    ("[[selected, summary_bm25_char2]]", "summary_bm25_char2 is not in retrieval.retrievers"),
    ("[[selected, 'hybrid-rrf:summary_bm25+summary_vector@0.5']]", "only min-max hybrids"),
    ("[[selected, 'hybrid:raw_text_bm25+raw_text_vector@0.5']]", "neither analysis.diagnostic_hybrid nor a hybrid"),
    ("[[reference, reference]]", "compares a method with itself"),
    ("[[selected]]", "declared_comparisons[0][1]"),
    ("[[selected, reference, diagnostic]]", "declared_comparisons"),
])
def test_unknown_names_are_one_line_naming_the_key(tmp_path, value, says):
    path = write(tmp_path, MINIMAL + f"statistics: {{declared_comparisons: {value}}}\n")
    message = error_of(path)
    assert message.startswith(str(path)) and "\n" not in message, message
    assert "statistics.declared_comparisons" in message and says in message, message


def test_roles_retrievers_and_hybrids_load(tmp_path):
    params = load_params(write(tmp_path, MINIMAL + "statistics: {declared_comparisons: [[selected, reference], "
                                                   "[summary_vector, raw_text_vector], "
                                                   "[selected, 'hybrid:summary_bm25+summary_vector@0.5']]}\n"))
    assert params.statistics.declared_comparisons[1] == ("summary_vector", "raw_text_vector")
    assert load_params(write(tmp_path, MINIMAL)).statistics.declared_comparisons == PAPER_COMPARISONS
    assert load_params(write(tmp_path, MINIMAL + "statistics: {declared_comparisons: []}\n")).statistics \
        .declared_comparisons == ()


def test_declared_resolves_roles_and_hybrid_spellings():
    section = StatisticsSection(declared_comparisons=(("selected", "reference"), ("summary_vector", "diagnostic"),
                                                      ("selected", "hybrid:summary_bm25+summary_vector@0.5")))
    methods = [SELECTED, "embedding_text_bm25", "summary_vector", DIAGNOSTIC]
    assert section.declared(ROLES, methods) == ((SELECTED, "embedding_text_bm25"), ("summary_vector", DIAGNOSTIC),
                                                (SELECTED, DIAGNOSTIC))
    assert StatisticsSection(declared_comparisons=()).declared(ROLES, methods) == ()


def test_a_hybrid_the_study_did_not_select_is_named_with_the_key():
    section = StatisticsSection(declared_comparisons=(("selected", "reference"),
                                                      ("selected", "hybrid:raw_text_bm25+summary_vector@0.35")))
    with pytest.raises(ValueError, match=r"^statistics\.declared_comparisons\[1\]: hybrid:raw_text_bm25\+summary_vector"
                                         r"@0\.35 is not a method this study scores"):
        section.declared(ROLES, [SELECTED, "embedding_text_bm25"])
