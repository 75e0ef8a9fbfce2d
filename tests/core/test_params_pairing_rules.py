"""``hybrid.pairings: auto | all``: the pairs a rule stands for, expanded when the study params are validated."""

import pytest
from pydantic import ValidationError

from pmrag.core.names import RetrieverId
from pmrag.core.params import DEFAULT_RETRIEVERS, DENSE, LEXICAL, PAPER_PAIRINGS, HybridSection, StudyParams, rule_pairings


def side(rid: RetrieverId) -> str:
    """A stand-in for the loader's rule: vector-like methods are dense."""
    return DENSE if rid.method in ("vector", "multivec") else LEXICAL


def study(pairings, retrievers=None, context=None, hybrid_extra=None) -> StudyParams:
    raw = {"run": "t", "dataset": {"synthetic": {"enabled": True}}, "hybrid": {"pairings": pairings, **(hybrid_extra or {})}}
    if retrievers is not None:
        raw["retrieval"] = {"retrievers": retrievers}
    return StudyParams.model_validate(raw, context={"retriever_side": side} if context is None else context)


def test_auto_pairs_every_lexical_with_every_dense_lexical_first_the_papers_six_first():
    names = ["raw_text_vector", "raw_text_bm25", "summary_bm25", "summary_vector", "raw_text_multivec_max"]
    assert rule_pairings("auto", names, side) == (
        ("summary_bm25", "summary_vector"), ("raw_text_bm25", "summary_vector"),   # the paper's, in its order
        ("raw_text_bm25", "raw_text_vector"), ("raw_text_bm25", "raw_text_multivec_max"),
        ("summary_bm25", "raw_text_vector"), ("summary_bm25", "raw_text_multivec_max"))


def test_all_pairs_every_two_retrievers_once():
    names = ["raw_text_bm25", "raw_text_vector", "summary_bm25"]
    assert rule_pairings("all", names, side) == (
        ("raw_text_bm25", "raw_text_vector"), ("raw_text_bm25", "summary_bm25"), ("summary_bm25", "raw_text_vector"))
    assert len(rule_pairings("all", [f"raw_text_bm25_v{i}" for i in range(5)], side)) == 10   # 5 choose 2


def test_a_rule_finding_no_pair_and_an_unknown_rule_are_errors():
    with pytest.raises(ValueError, match="auto finds no lexical × dense pair"):
        rule_pairings("auto", ["raw_text_bm25", "summary_bm25"], side)
    with pytest.raises(ValueError, match="all finds no pair of retrievers"):
        rule_pairings("all", ["raw_text_bm25"], side)
    with pytest.raises(ValueError, match="one of auto, all"):
        rule_pairings("every", ["raw_text_bm25"], side)


def test_the_default_six_are_the_papers_and_auto_over_the_default_list_adds_raw_text_vector():
    assert HybridSection().pairings == PAPER_PAIRINGS
    expanded = study("auto").hybrid.pairings   # the default retrievers: 3 BM25 × 3 vectors
    assert expanded[:6] == PAPER_PAIRINGS and len(expanded) == 9
    assert set(expanded[6:]) == {(b, "raw_text_vector") for b in ("raw_text_bm25", "summary_bm25", "embedding_text_bm25")}


def test_the_expanded_pairs_are_what_every_stage_reads_and_they_validate_again():
    params = study("all", [*DEFAULT_RETRIEVERS, "raw_text_multivec_max"])
    assert len(params.hybrid.pairings) == 21   # 7 choose 2
    assert params.hybrid.pairing_ids()[:6] == tuple((RetrieverId.parse(a), RetrieverId.parse(b))
                                                    for a, b in PAPER_PAIRINGS)
    assert ("raw_text_vector", "raw_text_multivec_max") in params.hybrid.pairings
    assert ("raw_text_bm25", "summary_bm25") in params.hybrid.pairings
    again = StudyParams.model_validate(params.model_dump(mode="json"))   # no rule left: no context needed
    assert again.hybrid.pairings == params.hybrid.pairings


def test_a_rule_needs_the_loaders_context_and_a_lone_section_cannot_expand_it():
    with pytest.raises(ValidationError, match="hybrid.pairings: 'auto' needs the registered retrievers"):
        study("auto", context={"methods": None})
    with pytest.raises(ValueError, match="a hybrid section alone has no retrievers"):
        HybridSection(pairings="auto").pairing_ids()


def test_a_bad_retriever_name_is_reported_by_the_retrieval_section_not_the_rule():
    with pytest.raises(ValidationError, match="retrievers") as caught:
        study("auto", ["raw_text_bm25", "nonsense"])
    assert "is not a retriever name" in str(caught.value)


def test_the_papers_selection_chooses_among_the_papers_six_a_broader_sweep_holds():
    six = tuple((RetrieverId.parse(a), RetrieverId.parse(b)) for a, b in PAPER_PAIRINGS)
    broader = study("auto").hybrid
    assert broader.selection_pairing_ids() == six and broader.broader()
    own = study([["raw_text_bm25", "raw_text_vector"]], [*DEFAULT_RETRIEVERS]).hybrid   # none of the six: its own
    assert own.selection_pairing_ids() == own.pairing_ids() and not own.broader()
    assert HybridSection().selection_pairing_ids() == six and not HybridSection().broader()
    listed = study([*PAPER_PAIRINGS[:2], ["raw_text_bm25", "raw_text_vector"]], [*DEFAULT_RETRIEVERS]).hybrid
    assert listed.selection is None and listed.selection_pairing_ids() == listed.pairing_ids()   # a list: all of it
    assert not listed.broader()
    narrowed = HybridSection(pairings=listed.pairings, selection="paper")
    assert narrowed.selection_pairing_ids() == six[:2] and narrowed.broader()
    assert study("auto").hybrid.selection == "paper"
    assert study("auto", hybrid_extra={"selection": "swept"}).hybrid.selection_pairing_ids() == broader.pairing_ids()


def test_multi_lists_name_three_or_more_listed_retrievers_each_once():
    three = ["raw_text_bm25", "summary_bm25", "summary_vector"]
    params = StudyParams.model_validate({"run": "t", "dataset": {"synthetic": {"enabled": True}},
                                         "hybrid": {"multi": [three]}})
    assert params.hybrid.multi == (tuple(three),) and HybridSection().multi == ()
    assert params.hybrid.multi_fusions == ("minmax", "rrf") and params.hybrid.multi_step == 0.1
    for bad, message in (([three[:2]], "three or more different retrievers"),
                         ([[*three[:2], three[0]]], "three or more different retrievers"),
                         ([three, three], "each list of retrievers once"),
                         ([[*three[:2], "raw_text_multivec_max"]], r"hybrid.multi\[0\]: raw_text_multivec_max is not "
                                                                   "in retrieval.retrievers")):
        with pytest.raises(ValidationError, match=message):
            StudyParams.model_validate({"run": "t", "dataset": {"synthetic": {"enabled": True}},
                                        "hybrid": {"multi": bad}})
    with pytest.raises(ValidationError, match="1/multi_step must be a whole number"):
        HybridSection(multi_step=0.3)
    with pytest.raises(ValidationError, match="each fusion once"):
        HybridSection(multi_fusions=["rrf", "rrf"])
