"""Retriever and hybrid names (pmrag.core.names): one format, one parse, exact β, safe file names and tags."""

import re

import pytest

from pmrag.core.names import (
    FUSIONS,
    REPRESENTATIONS,
    HybridId,
    InvalidName,
    RetrieverId,
    format_beta,
    is_hybrid,
    parse_method,
)

METHODS = ("bm25", "vector")
ALL_RETRIEVERS = [f"{rep}_{method}" for rep in REPRESENTATIONS for method in METHODS] + ["raw_text_bm25_sudachi"]


@pytest.mark.parametrize("name", ALL_RETRIEVERS)
def test_retriever_name_round_trips(name):
    rid = RetrieverId.parse(name)
    assert str(rid) == name
    assert RetrieverId.parse(str(rid)) == rid
    assert parse_method(name) == rid
    assert rid.representation in REPRESENTATIONS


def test_retriever_parts():
    assert RetrieverId.parse("embedding_text_bm25") == RetrieverId("embedding_text", "bm25")
    assert RetrieverId.parse("raw_text_vector") == RetrieverId("raw_text", "vector", None)
    assert RetrieverId.parse("raw_text_bm25_sudachi") == RetrieverId("raw_text", "bm25", "sudachi")
    assert str(RetrieverId("summary", "bm25", "sudachi")) == "summary_bm25_sudachi"


@pytest.mark.parametrize("text", ["bm25", "raw_text_", "raw_text_BM25", "raw_text__bm25", "raw_text_bm25_",
                                  "foo_bm25", "summary_bm25_sudachi_x", "", "RAW_TEXT_bm25"])
def test_malformed_retriever_names_are_refused(text):
    with pytest.raises(InvalidName):
        RetrieverId.parse(text)
    with pytest.raises(ValueError):   # InvalidName is a ValueError: pydantic validators report it as one
        parse_method(text)
    assert not is_hybrid(text)


def test_retriever_id_checks_its_parts():
    with pytest.raises(InvalidName):
        RetrieverId("foo", "bm25")
    with pytest.raises(InvalidName):
        RetrieverId("raw_text", "bm 25")
    with pytest.raises(InvalidName):
        RetrieverId.parse(42)


@pytest.mark.parametrize("first", ALL_RETRIEVERS)
def test_hybrid_name_round_trips(first):
    second = "embedding_text_vector"
    for beta in (0.0, 0.005, 0.35, 0.5, 1.0):
        hid = HybridId(RetrieverId.parse(first), RetrieverId.parse(second), beta)
        text = str(hid)
        assert text == f"hybrid:{first}+{second}@{format_beta(beta)}"
        assert HybridId.parse(text) == hid
        assert parse_method(text) == hid
        assert is_hybrid(text)
        assert hid.pairing == (RetrieverId.parse(first), RetrieverId.parse(second))


def test_hybrid_name_example_from_the_paper():
    hid = HybridId.parse("hybrid:raw_text_bm25+embedding_text_vector@0.35")
    assert hid.first == RetrieverId("raw_text", "bm25")
    assert hid.second == RetrieverId("embedding_text", "vector")
    assert hid.beta == 0.35
    assert hid.file_stem() == "hybrid__raw_text_bm25+embedding_text_vector__beta0.35"
    assert hid.run_tag() == "hybrid_raw_text_bm25+embedding_text_vector@0.35"


@pytest.mark.parametrize("text", ["hybrid:a+b@x", "hybrid:raw_text_bm25+summary_vector",
                                  "hybrid:raw_text_bm25+summary_vector@1.5", "hybrid:raw_text_bm25@0.5",
                                  "hybrid:raw_text_bm25+summary_vector@0.35 ", "raw_text_bm25+summary_vector@0.35",
                                  "hybrid:raw_text_bm25+summary_vector@-0.1"])
def test_malformed_hybrid_names_are_refused(text):
    with pytest.raises(InvalidName):
        HybridId.parse(text)
    assert not is_hybrid(text)


def test_hybrid_id_checks_beta_and_fusion():
    a, b = RetrieverId.parse("summary_bm25"), RetrieverId.parse("summary_vector")
    with pytest.raises(InvalidName):
        HybridId(a, b, 1.5)
    with pytest.raises(InvalidName, match="unknown fusion 'wsum' \\(known: minmax, rrf, combmnz\\)"):
        HybridId(a, b, 0.5, fusion="wsum")
    assert HybridId(a, b, 0.5, fusion="rrf").fusion == "rrf"
    assert HybridId(a, b, 0.5).fusion == "minmax"
    assert HybridId(a, b, 1).beta == 1.0 and isinstance(HybridId(a, b, 1).beta, float)


def test_a_hybrid_is_made_from_its_retrievers_names_or_ids():
    a, b = RetrieverId.parse("summary_bm25"), RetrieverId.parse("raw_text_vector")
    assert HybridId.of("summary_bm25", "raw_text_vector", 0.35) == HybridId(a, b, 0.35)
    assert HybridId.of(a, "raw_text_vector", 0.35, "rrf") == HybridId(a, b, 0.35, "rrf")
    assert str(HybridId.of(a, b, 0.5)) == "hybrid:summary_bm25+raw_text_vector@0.50"
    with pytest.raises(InvalidName, match="'summary_bm99x_' is not a retriever name"):
        HybridId.of("summary_bm99x_", "raw_text_vector", 0.5)
    with pytest.raises(InvalidName, match="a retriever name is a string"):
        HybridId.of(None, b, 0.5)
    with pytest.raises(InvalidName, match="β must be in"):
        HybridId.of(a, b, 2.0)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_every_fusion_round_trips(fusion):
    a, b = RetrieverId.parse("raw_text_bm25_sudachi"), RetrieverId.parse("summary_excerpt_vector")
    for beta in (0.0, 0.005, 0.35, 1.0):
        hid = HybridId(a, b, beta, fusion)
        text = str(hid)
        assert HybridId.parse(text) == hid and parse_method(text) == hid and is_hybrid(text)
        assert HybridId.parse(text).fusion == fusion


def test_fusion_names_files_and_tags():
    a, b = RetrieverId.parse("summary_bm25"), RetrieverId.parse("raw_text_vector")
    paper, rrf, mnz = (HybridId(a, b, 0.35, f) for f in ("minmax", "rrf", "combmnz"))
    assert str(paper) == "hybrid:summary_bm25+raw_text_vector@0.35"            # the paper's names are unchanged
    assert str(rrf) == "hybrid-rrf:summary_bm25+raw_text_vector@0.35"
    assert str(mnz) == "hybrid-combmnz:summary_bm25+raw_text_vector@0.35"
    assert paper.file_stem() == "hybrid__summary_bm25+raw_text_vector__beta0.35"
    assert rrf.file_stem() == "hybrid-rrf__summary_bm25+raw_text_vector__beta0.35"
    assert rrf.run_tag() == "hybrid-rrf_summary_bm25+raw_text_vector@0.35"
    for hid in (rrf, mnz):
        for text in (hid.file_stem(), hid.run_tag()):
            assert ":" not in text and not re.search(r"\s", text) and "/" not in text, text


def test_names_stems_and_tags_never_coincide_across_fusions():
    retrievers = [RetrieverId.parse(n) for n in ALL_RETRIEVERS]
    ids = [HybridId(a, b, beta, f) for a in retrievers[:4] for b in retrievers[-4:] for beta in (0.0, 0.35, 0.5)
           for f in FUSIONS]
    for render in (str, HybridId.file_stem, HybridId.run_tag):
        assert len({render(h) for h in ids}) == len(ids)


@pytest.mark.parametrize("text", ["hybrid-minmax:summary_bm25+summary_vector@0.50",   # one spelling per name
                                  "hybrid-wsum:summary_bm25+summary_vector@0.50",
                                  "hybrid-:summary_bm25+summary_vector@0.50",
                                  "hybrid-RRF:summary_bm25+summary_vector@0.50",
                                  "hybrid_rrf:summary_bm25+summary_vector@0.50",
                                  "hybrid-rrf:summary_bm25+summary_vector",
                                  "hybrid-rrf__summary_bm25+summary_vector__beta0.50"])
def test_malformed_fusion_names_are_refused(text):
    with pytest.raises(InvalidName):
        HybridId.parse(text)
    with pytest.raises(InvalidName):
        parse_method(text)
    assert not is_hybrid(text)


@pytest.mark.parametrize(("beta", "text"), [
    (0, "0.00"), (0.0, "0.00"), (0.5, "0.50"), (0.35, "0.35"), (0.005, "0.005"), (1, "1.00"), (1.0, "1.00"),
    (round(0.1 + 0.05, 10), "0.15"), (round(3 * 0.05, 10), "0.15"), (0.125, "0.125"),
])
def test_format_beta_has_two_decimals_at_least_and_never_rounds(beta, text):
    assert format_beta(beta) == text


def test_format_beta_of_the_float_sum_itself():
    assert 0.1 + 0.05 == 0.15000000000000002
    assert format_beta(0.1 + 0.05) == "0.15"


def test_a_fine_grid_parses_back_exactly():
    a, b = RetrieverId.parse("raw_text_bm25"), RetrieverId.parse("summary_vector")
    betas = [round(i * 0.001, 10) for i in range(1001)]
    ids = [HybridId(a, b, beta) for beta in betas]
    assert len({str(h) for h in ids}) == 1001
    assert [HybridId.parse(str(h)).beta for h in ids] == betas


@pytest.mark.parametrize("name", ALL_RETRIEVERS)
def test_file_stems_and_run_tags_are_safe(name):
    rid = RetrieverId.parse(name)
    hid = HybridId(rid, RetrieverId.parse("summary_vector"), 0.35)
    for text in (rid.file_stem(), rid.run_tag(), hid.file_stem(), hid.run_tag()):
        assert ":" not in text and not re.search(r"\s", text) and "/" not in text, text
    assert rid.file_stem() == name and rid.run_tag() == name
    assert hid.file_stem() == f"hybrid__{name}+summary_vector__beta0.35"
    assert hid.run_tag() == f"hybrid_{name}+summary_vector@0.35"


def test_is_hybrid():
    assert is_hybrid("hybrid:summary_bm25+summary_vector@0.50")
    assert is_hybrid(HybridId(RetrieverId("summary", "bm25"), RetrieverId("summary", "vector"), 0.5))
    assert not is_hybrid("summary_bm25")
    assert not is_hybrid("hybrid:summary_bm25+summary_vector")
    assert not is_hybrid(None)
    assert not is_hybrid("hybrid__summary_bm25+summary_vector__beta0.50")   # a file stem is not a name
