"""embedding_text is assembled exactly as §3.3 says; the prompt sets ship with the package."""

import pandas as pd
import pytest

from pmrag.represent.representations import (
    EmbeddingTextTemplate, build_representations, length_table, read_prompt, representation_lengths,
    representation_profile, representation_texts, summary_input,
)

RAW = "2026-04-10 20:15 A: 明日何時?\n2026-04-10 20:16 B: 18時くらい\n2026-04-10 20:17 A: 塾あるから遅れるかも"


def test_embedding_text_is_prefix_summary_label_excerpt_on_separate_lines():
    template = EmbeddingTextTemplate("PREFIX", "LABEL:", excerpt_chars=10)
    assert template.build("要約です。", RAW) == "PREFIX\n要約です。\nLABEL:\n" + RAW[:10]


def test_paper_japanese_prompt_set_is_the_default():
    template = EmbeddingTextTemplate.from_prompts()
    assert template.excerpt_label == "原文抜粋:"
    assert "LINE" in template.prefix and "検索" in template.prefix
    text = template.build("AとBが翌日の待ち合わせ時刻を相談した。", RAW)
    assert text.splitlines()[0] == template.prefix
    assert text.splitlines()[2] == "原文抜粋:"
    assert text.endswith(RAW)


def test_english_set_and_a_missing_set():
    assert EmbeddingTextTemplate.from_prompts("en").excerpt_label == "Original-text excerpt:"
    with pytest.raises(FileNotFoundError, match="nowhere"):
        read_prompt("/nowhere/prompts", "embedding_prefix")


def test_excerpt_is_the_first_4000_characters_and_summary_input_the_first_7000():
    raw = "x" * 3000 + "y" * 5000
    built = EmbeddingTextTemplate("P", "L").build("S", raw)
    assert built == "P\nS\nL\n" + "x" * 3000 + "y" * 1000
    assert summary_input(raw) == raw[:7000] and len(summary_input(raw)) == 7000


def test_build_representations_keeps_failed_summaries_visible():
    chunks = pd.DataFrame({"chunk_id": ["c1", "c2", "c3"], "raw_text": ["r1", "r2", "r3"]})
    summaries = pd.DataFrame({"chunk_id": ["c1", "c2"], "summary": ["s1", None], "status": ["ok", "error"]})
    reps = build_representations(chunks, summaries, EmbeddingTextTemplate("P", "L"))
    assert reps["summary"].tolist() == ["s1", "", ""]
    assert reps["summary_status"].tolist() == ["ok", "error", "missing"]
    assert reps["embedding_text"].tolist() == ["P\ns1\nL\nr1", "P\n\nL\nr2", "P\n\nL\nr3"]


@pytest.mark.parametrize("prefix", ["P", "two\nlines", ""])
def test_every_ablation_text_is_what_the_template_builds(prefix):
    """summary_excerpt is not held but cut from embedding_text: it must equal build_without_prefix, a prefix of
    several lines or none included; prefix and excerpt are held, the excerpt sharing raw_text when no longer."""
    template = EmbeddingTextTemplate(prefix, "L:", excerpt_chars=5)
    chunks = pd.DataFrame({"chunk_id": ["c1", "c2", "c3"], "raw_text": ["short", "a longer text", "x\ny"]})
    summaries = pd.DataFrame({"chunk_id": ["c1", "c3"], "summary": ["要約\n二行", "s"], "status": ["ok", "ok"]})
    reps = build_representations(chunks, summaries, template)
    assert "summary_excerpt" not in reps.columns
    summary, raw = reps["summary"].tolist(), reps["raw_text"].tolist()
    assert representation_texts(reps, "summary_excerpt") == [template.build_without_prefix(s, r)
                                                               for s, r in zip(summary, raw)]
    assert representation_texts(reps, "excerpt") == [template.excerpt(r) for r in raw]
    assert representation_texts(reps, "prefix") == [prefix] * 3
    assert representation_texts(reps, "embedding_text") == [template.build(s, r) for s, r in zip(summary, raw)]
    assert reps["excerpt"].iloc[0] is reps["raw_text"].iloc[0]
    for not_a_text in ("chunk_id", "summary_status", "summary_excerpts"):
        with pytest.raises(KeyError, match=f"no representation '{not_a_text}'"):
            representation_texts(reps, not_a_text)


def test_length_table_counts_chunks_over_the_papers_thresholds():
    reps = pd.DataFrame({"chunk_id": ["x", "y", "z"], "raw_text": ["a" * 7001, "b" * 4001, "c"], "summary": ["s"] * 3,
                         "embedding_text": ["e" * 10] * 3})
    table = length_table(representation_lengths(reps))
    assert table.loc["raw_text", "> 7,000"] == 1 and table.loc["raw_text", "> 4,000"] == 2
    assert table.loc["raw_text", "max"] == 7001 and table.loc["summary", "mean"] == 1


def test_the_profile_holds_every_chunks_lengths_and_the_first_questions_first_primary_chunk():
    reps = pd.DataFrame({"chunk_id": ["c1", "c2", "c3"], "raw_text": ["私の日記", "ab", ""],
                         "summary": ["s", "", "sum"], "summary_status": ["ok", "error", "ok"],
                         "embedding_text": ["e1", "e22", "e333"]})
    qrels = pd.DataFrame({"question_id": ["q2", "q1", "q1"], "chunk_id": ["c1", "c3", "c2"], "relevance": [2, 2, 2]})
    profile = representation_profile(reps, qrels)
    assert profile.lengths.to_dict("list") == {"chunk_id": ["c1", "c2", "c3"], "raw_text": [4, 2, 0],
                                               "summary": [1, 0, 3], "embedding_text": [2, 3, 4]}
    assert profile.example.name == "c2" and profile.example.to_dict() == {"raw_text": "ab", "summary": "",
                                                                          "embedding_text": "e22"}
    assert representation_profile(reps, qrels.iloc[:0]).example.name == "c1"   # no primary gold: the first chunk
