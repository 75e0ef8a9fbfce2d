"""What a study loses (pmrag.evaluate.coverage): messages in no chunk, questions dropped and why, and the
primary evidence each retriever never sees — on hand-built chunks whose answer is known, on a real store,
and end to end on a tiny study recounted by a brute force written differently."""

import json
from datetime import datetime, timedelta

import pandas as pd
import pytest

from pmrag.chunking import store as chunk_store
from pmrag.chunking.stats import primary_gold_questions, session_sizes, session_window_stats
from pmrag.chunking.windows import ChunkMessage, chunk_source, render_line
from pmrag.core import store
from pmrag.core.errors import PmragError
from pmrag.core.params import ChunkingSection, EmbeddingSection, RepresentationsSection, SummarizerSection
from pmrag.core.records import Evidence, MessageRecord, QuestionRecord, Rejected, SourceBatch
from pmrag.evaluate import coverage as cov
from pmrag.ingest import store as ingest_store
from pmrag.represent.embed import shorten_for_embedding
from pmrag.represent.representations import EmbeddingTextTemplate, build_representations, read_prompt

from pmrag.study import Study

from conftest import make_tiny_study

T0 = datetime(2024, 4, 10, 9, 0)
HEAD = len("2024-04-10 09:00 A: ")   # 20: every line here is this head + its text
EN = RepresentationsSection(prompts="en")


def corpus(texts, chunking=ChunkingSection(), summaries=None, statuses=None, representations=EN):
    """``(messages, chunk_messages, texts)`` frames of one source chunked by the real chunker; ``summaries``
    (one per chunk, default ``"a summary"``) go through the real ``build_representations``."""
    msgs = [ChunkMessage(f"m{i}", "s", i, T0 + timedelta(minutes=i), "A", t) for i, t in enumerate(texts)]
    chunks = chunk_source("s", msgs, chunking)
    messages = pd.DataFrame(msgs)
    links = pd.DataFrame([(c.chunk_id, i, m) for c in chunks for i, m in enumerate(c.message_ids)],
                         columns=["chunk_id", "position", "message_id"])
    summaries = summaries or ["a summary"] * len(chunks)
    statuses = statuses or ["ok"] * len(chunks)
    chunk_frame = pd.DataFrame({"chunk_id": [c.chunk_id for c in chunks], "raw_text": [c.raw_text for c in chunks]})
    summary_frame = pd.DataFrame({"chunk_id": chunk_frame["chunk_id"], "summary": summaries, "status": statuses})
    template = EmbeddingTextTemplate.from_prompts(representations.prompts, representations.excerpt_chars)
    return messages, links, build_representations(chunk_frame, summary_frame, template)


def evidence(pairs):
    """``[(question_id, message_id, relevance), ...]`` as a question_evidence frame."""
    return pd.DataFrame(pairs, columns=["question_id", "message_id", "relevance"])


def thousand_char_lines(n=4):
    """n messages whose lines are exactly 1,000 characters: line i spans [1001·i, 1001·i + 1000) of raw_text."""
    return [chr(ord("a") + i) * (1000 - HEAD) for i in range(n)]


def visibility(frames, qe, retrievers, embedding=EmbeddingSection(), representations=EN,
               summarizer=SummarizerSection()):
    messages, links, texts = frames
    return cov.evidence_visibility(qe, messages, links, texts, retrievers, embedding=embedding,
                                   representations=representations, summarizer=summarizer)


def seen(frame, retriever):
    """``message_id → (status, reason, visible_chars)`` of one retriever."""
    mine = frame[frame["retriever"] == retriever].drop_duplicates("message_id")
    return {r.message_id: (r.status, r.reason, r.visible_chars) for r in mine.itertuples(index=False)}


ONE_EACH = evidence([(f"q{i}", f"m{i}", 2) for i in range(4)])


# -------------------------------------------------------------------------------------------- the cuts

def test_the_embedding_cut_hides_the_middle_of_a_long_chunk_from_vector_but_not_from_bm25():
    frames = corpus(thousand_char_lines())
    assert len(frames[2]) == 1 and len(frames[2]["raw_text"][0]) == 4003   # one chunk, longer than max_chars
    frame = visibility(frames, ONE_EACH, ["raw_text_vector", "raw_text_bm25"], EmbeddingSection(max_chars=2000))
    # head [0, 1000) and tail [3003, 4003) are kept: the first and last lines, exactly
    assert seen(frame, "raw_text_vector") == {
        "m0": ("shown", "", 1000), "m1": ("hidden", cov.OUTSIDE_EMBEDDING_CUT, 0),
        "m2": ("hidden", cov.OUTSIDE_EMBEDDING_CUT, 0), "m3": ("shown", "", 1000)}
    assert {v[0] for v in seen(frame, "raw_text_bm25").values()} == {"shown"}
    assert frame["line_chars"].eq(1000).all() and frame["n_chunks"].eq(1).all()


def test_a_line_straddling_the_cut_is_partly_shown():
    frames = corpus(thousand_char_lines())
    frame = visibility(frames, ONE_EACH, ["raw_text_vector"], EmbeddingSection(max_chars=2000, head_fraction=0.6))
    # head [0, 1200) reaches 199 characters of line 1 ([1001, 2001)); tail [3203, 4003) 800 of line 3
    assert seen(frame, "raw_text_vector") == {
        "m0": ("shown", "", 1000), "m1": ("partly", cov.OUTSIDE_EMBEDDING_CUT, 199),
        "m2": ("hidden", cov.OUTSIDE_EMBEDDING_CUT, 0), "m3": ("partly", cov.OUTSIDE_EMBEDDING_CUT, 800)}


def test_window_averaging_embeds_the_whole_text_so_nothing_is_cut():
    frames = corpus(thousand_char_lines())
    frame = visibility(frames, ONE_EACH, ["raw_text_vector", "embedding_text_vector"],
                       EmbeddingSection(max_chars=2000, long_text="window_average"))
    assert {v[0] for v in seen(frame, "raw_text_vector").values()} == {"shown"}
    # embedding_text still holds only the 4,000-character excerpt (lines 0-2 whole, 997 characters of line 3)
    assert seen(frame, "embedding_text_vector")["m3"] == ("partly", cov.OUTSIDE_EXCERPT, 997)


def test_the_ablation_parts_see_what_their_text_holds():
    representations = RepresentationsSection(prompts="en", excerpt_chars=1500)
    frames = corpus(thousand_char_lines(), representations=representations)
    names = ["prefix_bm25", "excerpt_bm25", "summary_excerpt_bm25", "summary_excerpt_vector", "excerpt_vector"]
    frame = visibility(frames, ONE_EACH, names, EmbeddingSection(max_chars=1200, head_fraction=1.0), representations)
    assert set(seen(frame, "prefix_bm25").values()) == {("hidden", cov.NO_CHAT_TEXT, 0)}
    excerpt = {"m0": ("shown", "", 1000), "m1": ("partly", cov.OUTSIDE_EXCERPT, 499),
               "m2": ("hidden", cov.OUTSIDE_EXCERPT, 0), "m3": ("hidden", cov.OUTSIDE_EXCERPT, 0)}
    assert seen(frame, "excerpt_bm25") == excerpt == seen(frame, "summary_excerpt_bm25")
    # the 1,200-character head of the excerpt alone reaches 199 characters of line 1 (the first loss, the
    # excerpt's end, names the reason)
    assert seen(frame, "excerpt_vector")["m1"] == ("partly", cov.OUTSIDE_EXCERPT, 199)
    # summary_excerpt = summary \n label \n excerpt: the head spends some characters on summary and label
    head_room = 1200 - len(frames[2]["summary"][0]) - len(read_prompt("en", "excerpt_label")) - 2
    assert seen(frame, "summary_excerpt_vector")["m1"] == ("partly", cov.OUTSIDE_EXCERPT, head_room - 1001)


def test_a_short_chunk_is_shown_whole_to_vector():
    frame = visibility(corpus(thousand_char_lines()), ONE_EACH, ["raw_text_vector"], EmbeddingSection(max_chars=4003))
    assert set(frame["status"]) == {"shown"}


@pytest.mark.parametrize("policy", ["fixed", "resume"])
def test_a_message_trimmed_off_by_the_fixed_policy_is_in_no_chunk_and_hidden_from_every_retriever(policy):
    # 4-message windows of 50-character lines, trimmed to 100 characters: each window keeps one message
    chunking = ChunkingSection(window_size=4, stride=3, max_summary_input_chars=100, trim_policy=policy)
    frames = corpus(["t" * 30] * 7, chunking)
    messages, links, _ = frames
    left = cov.messages_in_no_chunk(messages, links)
    coverage = cov.chunk_coverage(messages, links)
    qe = evidence([("q", "m1", 2), ("q", "m0", 1)])
    retrievers = ["raw_text_bm25", "raw_text_vector", "summary_bm25", "embedding_text_bm25", "embedding_text_vector"]
    frame = visibility(frames, qe, retrievers)
    assert len(frame) == len(retrievers)   # the primary evidence only: m0 (relevance 1) is not counted
    if policy == "fixed":   # windows start at messages 0 and 3 (the second reaches the end: the loop stops)
        assert left["message_id"].tolist() == ["m1", "m2", "m4", "m5", "m6"]
        assert coverage.to_dict("records") == [{"source": "s", "messages": 7, "in_no_chunk": 5,
                                                "share_in_no_chunk": 5 / 7}]
        assert set(frame["status"]) == {"hidden"} and set(frame["reason"]) == {cov.IN_NO_CHUNK}
        assert frame["n_chunks"].eq(0).all()
    else:
        assert left.empty and coverage["in_no_chunk"].tolist() == [0]
        assert set(frame["status"]) == {"shown"}


def test_embedding_text_sees_only_the_excerpt():
    representations = RepresentationsSection(prompts="en", excerpt_chars=1500)
    frames = corpus(thousand_char_lines(), representations=representations)
    frame = visibility(frames, ONE_EACH, ["embedding_text_bm25", "embedding_text_vector"],
                       EmbeddingSection(max_chars=10_000), representations)
    expected = {"m0": ("shown", "", 1000), "m1": ("partly", cov.OUTSIDE_EXCERPT, 499),
                "m2": ("hidden", cov.OUTSIDE_EXCERPT, 0), "m3": ("hidden", cov.OUTSIDE_EXCERPT, 0)}
    assert seen(frame, "embedding_text_bm25") == expected
    assert seen(frame, "embedding_text_vector") == expected   # nothing cut: 1,500 + prefix < 10,000


def test_embedding_text_vector_spends_its_head_on_the_prefix_and_summary():
    summary = "s" * 1200
    frames = corpus(thousand_char_lines(), summaries=[summary])
    frame = visibility(frames, ONE_EACH, ["embedding_text_vector"], EmbeddingSection(max_chars=2000))
    # embedding_text = prefix \n summary \n label \n raw[:4000]: the excerpt starts at `offset`
    offset = len(read_prompt("en", "embedding_prefix")) + len(summary) + len(read_prompt("en", "excerpt_label")) + 3
    assert offset > 1000   # the 1,000-character head holds no raw_text at all
    tail_start = 4000 - 1000   # the tail is embedding_text's last 1,000 characters, raw_text[3000:4000]
    assert seen(frame, "embedding_text_vector") == {
        "m0": ("hidden", cov.OUTSIDE_EMBEDDING_CUT, 0), "m1": ("hidden", cov.OUTSIDE_EMBEDDING_CUT, 0),
        "m2": ("partly", cov.OUTSIDE_EMBEDDING_CUT, 3002 - tail_start),   # line 2 ends at 3002
        "m3": ("partly", cov.OUTSIDE_EXCERPT, 4000 - 3003)}   # the excerpt ends 3 characters into line 3


def test_summary_retrievers_see_the_summarizer_input_at_most_and_nothing_without_a_summary():
    qe = evidence([("q0", "m0", 2), ("q1", "m1", 2), ("q2", "m2", 2)])
    summarizer = SummarizerSection(max_input_chars=1500)
    frame = visibility(corpus(thousand_char_lines()), qe, ["summary_bm25", "summary_vector"], summarizer=summarizer)
    for retriever in ("summary_bm25", "summary_vector"):
        assert seen(frame, retriever) == {"m0": ("shown", "", 1000),
                                          "m1": ("partly", cov.OUTSIDE_SUMMARIZER_INPUT, 499),
                                          "m2": ("hidden", cov.OUTSIDE_SUMMARIZER_INPUT, 0)}
    failed = corpus(thousand_char_lines(), statuses=["error"])
    frame = visibility(failed, qe, ["summary_bm25", "embedding_text_bm25"], summarizer=summarizer)
    assert set(seen(frame, "summary_bm25").values()) == {("hidden", cov.NO_SUMMARY, 0)}
    assert {v[0] for v in seen(frame, "embedding_text_bm25").values()} == {"shown"}   # its excerpt is still there


def test_a_message_in_two_chunks_is_shown_when_one_chunk_shows_it():
    # 43 messages: windows [0, 42) and [36, 43); message 40 is past the first 1,000 characters of the first
    # (long) chunk, and the second chunk (706 characters) is embedded whole
    frames = corpus(["w" * 80] * 43)
    frame = visibility(frames, evidence([("q", "m40", 2), ("q", "m20", 2)]), ["raw_text_vector"],
                       EmbeddingSection(max_chars=1000, head_fraction=1.0))
    assert seen(frame, "raw_text_vector") == {"m40": ("shown", "", 100), "m20": ("hidden", cov.OUTSIDE_EMBEDDING_CUT, 0)}
    assert dict(zip(frame["message_id"], frame["n_chunks"])) == {"m40": 2, "m20": 1}


def test_a_message_hidden_in_two_chunks_takes_the_reason_of_the_chunk_where_it_got_furthest():
    # message 40 is past the 3,000-character excerpt of the first chunk, inside the excerpt of the second, and
    # there in the middle that the 400-character cut of embedding_text drops
    representations = RepresentationsSection(prompts="en", excerpt_chars=3000)
    frames = corpus(["w" * 80] * 43, representations=representations)
    frame = visibility(frames, evidence([("q", "m40", 2)]), ["embedding_text_bm25", "embedding_text_vector"],
                       EmbeddingSection(max_chars=400), representations)
    assert seen(frame, "embedding_text_bm25") == {"m40": ("shown", "", 100)}   # the second chunk's excerpt
    assert seen(frame, "embedding_text_vector") == {"m40": ("hidden", cov.OUTSIDE_EMBEDDING_CUT, 0)}


def test_stale_chunks_are_refused():
    messages, links, texts = corpus(thousand_char_lines())
    texts = texts.assign(raw_text=texts["raw_text"].str.replace("b", "B", n=1, regex=False))
    with pytest.raises(PmragError, match=r"chunk '.*': its raw_text is not its messages' lines .* rerun the chunks stage"):
        cov.evidence_lines(ONE_EACH, messages, links, texts)
    with pytest.raises(PmragError, match="its embedding_text is not what representations.prompts"):
        visibility(corpus(thousand_char_lines()), ONE_EACH, ["embedding_text_bm25"],
                   representations=RepresentationsSection(prompts="ja"))


# -------------------------------------------------------------------------- per question and per retriever

def test_per_question_counts_summary_and_recall_split():
    qe = evidence([("qa", "m0", 2), ("qb", "m0", 2), ("qb", "m1", 2), ("qc", "m1", 2), ("qc", "m2", 2)])
    frame = visibility(corpus(thousand_char_lines()), qe, ["raw_text_vector", "raw_text_bm25"],
                       EmbeddingSection(max_chars=2000))
    by_question = cov.visibility_by_question(frame)
    vector = by_question[by_question["retriever"] == "raw_text_vector"].set_index("question_id")
    assert vector.loc[["qa", "qb", "qc"], ["n_primary_evidence", "n_shown", "n_partly", "n_hidden"]].values.tolist() == [
        [1, 1, 0, 0], [2, 1, 0, 1], [2, 0, 0, 2]]
    assert vector["all_shown"].tolist() == [True, False, False] and vector["all_hidden"].tolist() == [False, False, True]
    summary = cov.visibility_summary(frame).set_index("retriever")
    assert summary.index.tolist() == ["raw_text_vector", "raw_text_bm25"]
    assert summary.loc["raw_text_vector", ["evidence_messages", "shown", "partly", "hidden", "questions",
                                           "questions_all_shown", "questions_some_hidden", "questions_all_hidden"]
                       ].tolist() == [5, 2, 0, 3, 3, 1, 2, 1]
    assert summary.loc["raw_text_vector", "share_hidden"] == pytest.approx(3 / 5)
    assert summary.loc["raw_text_bm25", "share_hidden"] == 0
    assert cov.visibility_reasons(frame).values.tolist() == [["raw_text_vector", "hidden", cov.OUTSIDE_EMBEDDING_CUT, 3]]

    wide = pd.DataFrame({"retriever": ["raw_text_vector"] * 3 + ["raw_text_bm25"] * 3 + ["hybrid:x"],
                         "question_id": ["qa", "qb", "qc"] * 2 + ["qa"],
                         "recall@5": [1.0, 0.5, 0.0, 1.0, 1.0, 0.5, 0.0]})
    split = cov.recall_by_visibility(by_question, wide).set_index("retriever")
    assert split.loc["raw_text_vector"].tolist() == [1, 1.0, 2, 0.25, -0.75]
    assert split.loc["raw_text_bm25", "questions_not_all_shown"] == 0
    assert pd.isna(split.loc["raw_text_bm25", "recall_not_all_shown"])
    long = wide.melt(id_vars=["retriever", "question_id"], var_name="metric", value_name="value")
    pd.testing.assert_frame_equal(cov.recall_by_visibility(by_question, long), split.reset_index())


# ------------------------------------------------------------------------------------- questions dropped

def test_question_losses_name_every_dropped_question_and_its_reason(tmp_path):
    engine = store.open_store(tmp_path / "s.sqlite")
    batch = SourceBatch(path="chat.json", format="line-json", records_read=7)
    batch.messages = [MessageRecord(source="s", source_order=i, occurred_at=T0 + timedelta(minutes=i), sender="A",
                                    type="text", text="t" * 30) for i in range(7)]
    ingest_store.store_batch(engine, batch, "sha-chat")
    primary = lambda *orders: tuple(Evidence(relevance=2, source="s", source_order=o) for o in orders)  # noqa: E731
    questions = [
        QuestionRecord("q-ok", "?", "factual", primary(0)),
        QuestionRecord("q-trimmed", "?", "factual", primary(1, 2)),       # both messages trimmed off (fixed)
        QuestionRecord("q-half", "?", "factual", primary(3, 4)),          # message 4 trimmed off (chunks: 0 and 3)
        QuestionRecord("q-support", "?", "factual", (Evidence(relevance=1, source="s", source_order=0),)),
        QuestionRecord("q-chat", "?", "chitchat", primary(1, 3)),         # excluded by type (and half trimmed)
    ]
    qbatch = SourceBatch(path="q.json", format="questions-json", questions=questions, questions_read=8)
    qbatch.rejected = [
        Rejected("[0].qa[5]", "question has no evidence left, so it cannot be scored: 'D1:9' names no turn", "question"),
        Rejected("[0].qa[6]", "question has no evidence left, so it cannot be scored: 'D2:1' names no turn", "question"),
        Rejected("key questions[7].type", "expected a non-empty string", "question"),
    ]
    ingest_store.store_batch(engine, qbatch, "sha-q")
    chunk_store.rebuild_chunks(engine, ChunkingSection(window_size=4, stride=3, max_summary_input_chars=100))
    chunk_store.derive_qrels(engine)
    tables = {name: store.read_table(engine, name) for name in
              ("questions", "question_evidence", "chunk_messages", "rejections", "qrels")}

    losses = cov.question_losses(tables["questions"], tables["question_evidence"], tables["chunk_messages"],
                                 tables["rejections"], excluded_types=["chitchat"])
    assert len(losses) == 8   # every question read
    stored = losses[losses["question_id"].notna()].set_index("question_id")
    assert stored["stage"].to_dict() == {"q-chat": "params", "q-half": "evaluated", "q-ok": "evaluated",
                                         "q-support": "questions", "q-trimmed": "chunking"}
    assert stored.loc["q-trimmed", "reason"] == cov.NO_PRIMARY_IN_CHUNK
    assert stored.loc["q-half", "reason"] == cov.EVALUABLE_PART_LOST
    assert stored.loc["q-half", ["n_primary_evidence", "n_primary_in_no_chunk"]].tolist() == [2, 1]
    assert stored.loc["q-chat", "reason"] == "type excluded by params: chitchat"
    # the evaluated questions are exactly those the study scores: primary gold in some chunk, type kept
    evaluable = primary_gold_questions(tables["qrels"]) - {"q-chat"}
    assert set(stored.index[stored["evaluated"]]) == evaluable == {"q-ok", "q-half"}

    table = cov.losses_by_reason(losses)
    assert table.values.tolist() == [
        ["ingest", "question has no evidence left, so it cannot be scored", 2],
        ["ingest", "expected a non-empty string", 1],
        ["params", "type excluded by params: chitchat", 1],
        ["questions", cov.NO_PRIMARY_GIVEN, 1],
        ["chunking", cov.NO_PRIMARY_IN_CHUNK, 1],
        ["evaluated", cov.EVALUABLE, 1],
        ["evaluated", cov.EVALUABLE_PART_LOST, 1],
    ]
    assert table["questions"].sum() == 8
    warnings = cov.coverage_warnings(cov.chunk_coverage(store.read_table(engine, "messages"), tables["chunk_messages"]),
                                     losses, ChunkingSection())
    assert warnings[0].startswith("5 of 7 messages (71.4%) are in no chunk") and "'resume' leaves none out" in warnings[0]
    assert "1 of 8 questions are not evaluated (chunking): no primary evidence message in any chunk" in warnings
    assert any(w.startswith("1 evaluated questions have primary evidence in no chunk") for w in warnings)


def test_reason_kind_drops_details_and_quoted_values():
    assert cov.reason_kind("question has no evidence left, so it cannot be scored: 'D1:9' names no turn") == \
        "question has no evidence left, so it cannot be scored"
    assert cov.reason_kind("duplicate question_id 'q1'") == cov.reason_kind("duplicate question_id 'q2'")


# ---------------------------------------------------------------------------------- a real study, recounted

QUESTIONS = {"questions": [
    {"question_id": "q-ok", "question": "What did Aki say in the morning?", "type": "factual",
     "evidence": [{"source": "family", "source_order": 0, "relevance": 2},
                  {"source": "family", "source_order": 1, "relevance": 1}]},
    {"question_id": "q-unsent", "question": "Which message was unsent?", "type": "factual",
     "evidence": [{"source": "family", "source_order": 7, "relevance": 2}]},
    {"question_id": "q-lost", "question": "What did Ben repeat?", "type": "factual",
     "evidence": [{"source": "family", "source_order": 4, "relevance": 2}]},
    {"question_id": "q-half", "question": "Stickers and repeats?", "type": "factual",
     "evidence": [{"source": "family", "source_order": 1, "relevance": 2},
                  {"source": "family", "source_order": 4, "relevance": 2}]},
    {"question_id": "q-support", "question": "Anything at noon?", "type": "factual",
     "evidence": [{"source": "family", "source_order": 3, "relevance": 1}]},
    {"question_id": "q-chat", "question": "Small talk?", "type": "chitchat",
     "evidence": [{"source": "family", "source_order": 0, "relevance": 2}]},
    {"question_id": "q-bad", "question": "No type"},
]}


def brute_force_visibility(study, question_ids):
    """Each (retriever, question, primary evidence message) recounted from the texts themselves: the line found
    by occurrence in raw_text, visible spans from the documented head/tail and embedding_text layout (each layout
    checked against the real builders' output), status from the overlap."""
    p = study.params
    messages = study.messages().set_index("message_id")
    links = study.chunk_messages()
    reps = study.representations().set_index("chunk_id")
    qe = study.question_evidence()
    qe = qe[(qe["relevance"] == 2) & qe["question_id"].isin(question_ids)]
    prefix, label = read_prompt(p.representations.prompts, "embedding_prefix"), read_prompt(p.representations.prompts, "excerpt_label")
    max_chars, head = p.embedding.max_chars, round(p.embedding.max_chars * p.embedding.head_fraction)

    def cut(length):   # the kept spans of a text of `length` characters
        return [(0, length)] if length <= max_chars else [(0, head), (length - (max_chars - head), length)]

    def line_of(mid):
        m = messages.loc[mid]
        return render_line(ChunkMessage(mid, m["source"], m["source_order"], m["occurred_at"].to_pydatetime(), m["sender"], m["text"]))

    def spans(chunk_id, mid):
        ids = links.loc[links["chunk_id"] == chunk_id].sort_values("position")["message_id"].tolist()
        lines = [line_of(i) for i in ids]
        raw = reps.loc[chunk_id, "raw_text"]
        target = lines[ids.index(mid)]
        occurrence = sum(1 for line in lines[:ids.index(mid)] if line == target)
        start = -1
        for _ in range(occurrence + 1):
            start = raw.index(target, start + 1)
        return raw, start, start + len(target)

    def overlap(start, end, kept):
        return sum(max(0, min(end, b) - max(start, a)) for a, b in kept)

    rows = []
    for qid, mid in qe[["question_id", "message_id"]].itertuples(index=False):
        chunk_ids = links.loc[links["message_id"] == mid, "chunk_id"].tolist()
        for rid in study.retrievers():
            best = (0, -1, cov.IN_NO_CHUNK)
            for chunk_id in chunk_ids:
                raw, s, e = spans(chunk_id, mid)
                summary = reps.loc[chunk_id, "summary"]
                if rid.representation == "raw_text":
                    stages = [(cov.OUTSIDE_EMBEDDING_CUT, cut(len(raw)))] if rid.method == "vector" else []
                    if len(raw) > max_chars:
                        assert shorten_for_embedding(raw, max_chars, p.embedding.head_fraction) == \
                            raw[:head] + "\n" + raw[len(raw) - (max_chars - head):]
                elif rid.representation == "embedding_text":
                    offset = len(prefix) + len(summary) + len(label) + 3
                    excerpt = min(len(raw), p.representations.excerpt_chars)
                    assert reps.loc[chunk_id, "embedding_text"][offset:] == raw[:excerpt]
                    stages = [(cov.OUTSIDE_EXCERPT, [(0, excerpt)])]
                    if rid.method == "vector":
                        kept = [(max(0, a - offset), min(excerpt, b - offset)) for a, b in cut(offset + excerpt)]
                        stages.append((cov.OUTSIDE_EMBEDDING_CUT, [(a, b) for a, b in kept if a < b]))
                else:
                    stages = [(cov.OUTSIDE_SUMMARIZER_INPUT, [(0, p.summarizer.max_input_chars)])]
                visible, reached, reason = e - s, len(stages), ""
                for index, (why, kept) in enumerate(stages):
                    visible = overlap(s, e, kept)
                    if visible < e - s and reached == len(stages):
                        reached, reason = index, why
                best = max(best, (visible, reached, reason))
            length = len(line_of(mid))
            status = "shown" if best[0] == length else "partly" if best[0] else "hidden"
            rows.append((str(rid), qid, mid, status, "" if status == "shown" else best[2], best[0], length, len(chunk_ids)))
    return pd.DataFrame(rows, columns=["retriever", "question_id", "message_id", "status", "reason", "visible_chars",
                                       "line_chars", "n_chunks"])


@pytest.mark.integration
def test_a_real_study_runs_end_to_end_and_agrees_with_a_brute_force_recount(tmp_path):
    make_tiny_study(tmp_path, "chunking: {window_size: 4, stride: 3, max_summary_input_chars: 90}\n"
                    "embedding: {max_chars: 40, head_fraction: 0.4}\nrepresentations: {prompts: en, excerpt_chars: 50}\n"
                    "summarizer: {max_input_chars: 40}\nanalysis: {aggregate_type: factual}\n")
    params = tmp_path / "p.yaml"   # its dataset line gets two more keys
    params.write_text(params.read_text(encoding="utf-8").replace(
        "questions: data/questions.json}", "questions: data/questions.json, permissive: true, exclude_types: [chitchat]}"),
        encoding="utf-8")
    study = Study.from_params(params)
    (tmp_path / "data" / "questions.json").write_text(json.dumps(QUESTIONS), encoding="utf-8")
    p = study.params
    messages, links, qe = study.messages(), study.chunk_messages(), study.question_evidence()

    coverage = cov.chunk_coverage(messages, links)
    pd.testing.assert_frame_equal(cov.session_coverage(study.sessions()), coverage, check_dtype=False)
    assert study.coverage().chunk_coverage.equals(cov.session_coverage(study.sessions()))
    sessions = study.sessions()   # counted while chunking: the messages' own times give the same sessions
    assert sessions["messages"].tolist() == session_sizes(messages, p.chunking.session_gap_minutes)
    assert sessions["messages"].sum() == len(messages) and set(sessions["source"]) == set(messages["source"])
    assert sessions.groupby("source", sort=True).size().tolist() == (
        study.chunks().groupby("source", sort=True)["session_index"].max() + 1).tolist()
    stats = session_window_stats(sessions, study.chunks(), links, p.chunking).set_index("Item")["Value"]
    assert coverage["in_no_chunk"].sum() == stats["Messages in no chunk"] == len(cov.messages_in_no_chunk(messages, links)) > 0

    evaluation = study.evaluation()
    losses = cov.question_losses(study.questions(), qe, links, study.rejections(), evaluation.excluded_types)
    by_id = losses.set_index("question_id", drop=False)
    assert sorted(losses.loc[losses["evaluated"], "question_id"]) == sorted(evaluation.questions["question_id"])
    assert by_id.loc["q-lost", "reason"] == cov.NO_PRIMARY_IN_CHUNK
    assert by_id.loc["q-half", "reason"] == cov.EVALUABLE_PART_LOST
    assert by_id.loc["q-support", "stage"] == "questions" and by_id.loc["q-chat", "stage"] == "params"
    assert (losses["stage"] == "ingest").sum() == 1 and len(losses) == len(QUESTIONS["questions"])

    question_ids = evaluation.questions["question_id"]
    frame = cov.evidence_visibility(qe, messages, links, study.representations(), study.retrievers(),
                                    embedding=p.embedding, representations=p.representations,
                                    summarizer=p.summarizer, question_ids=question_ids)
    expected = brute_force_visibility(study, question_ids)
    rendered = cov.evidence_messages(qe, links, question_ids)   # enough messages for the lines: the stage reads only these
    assert 0 < len(rendered) < len(messages)
    few = messages[messages["message_id"].isin(rendered)]
    pd.testing.assert_frame_equal(cov.evidence_lines(qe, few, links, study.chunks(), question_ids),
                                  cov.evidence_lines(qe, messages, links, study.chunks(), question_ids))
    with pytest.raises(PmragError, match="is not in messages"):
        cov.evidence_lines(qe, few.iloc[1:], links, study.chunks(), question_ids)
    stage = study.coverage()
    pd.testing.assert_frame_equal(stage.chunk_coverage, coverage, check_dtype=False)
    pd.testing.assert_frame_equal(stage.visibility, frame)
    key = ["retriever", "question_id", "message_id"]
    pd.testing.assert_frame_equal(frame.sort_values(key).reset_index(drop=True),
                                  expected.sort_values(key).reset_index(drop=True), check_dtype=False)
    # the settings above exercise every outcome
    assert set(frame["status"]) == {"shown", "partly", "hidden"}
    assert {cov.IN_NO_CHUNK, cov.OUTSIDE_EMBEDDING_CUT} <= set(frame.loc[frame["status"] == "hidden", "reason"])
    assert {cov.OUTSIDE_EXCERPT, cov.OUTSIDE_SUMMARIZER_INPUT} <= set(frame.loc[frame["status"] == "partly", "reason"])

    by_question = cov.visibility_by_question(frame)
    metrics = study.metrics()
    split = cov.recall_by_visibility(by_question, metrics).set_index("retriever")
    for rid in study.retrievers():
        name = str(rid)
        mine = metrics[metrics["retriever"] == name].set_index("question_id")["recall@5"]
        flags = by_question[by_question["retriever"] == name].set_index("question_id")["all_shown"]
        shown = [mine[q] for q in flags.index if flags[q]]
        assert split.loc[name, "questions_all_shown"] == len(shown)
        assert split.loc[name, "questions_not_all_shown"] == len(flags) - len(shown)
        if shown:
            assert split.loc[name, "recall_all_shown"] == pytest.approx(sum(shown) / len(shown))
    warnings = cov.coverage_warnings(coverage, losses, p.chunking, cov.visibility_summary(frame))
    assert warnings and all("\n" not in w for w in warnings)


def test_chunks_without_summary_are_counted_and_warned_about():
    texts = pd.DataFrame({"chunk_id": ["a", "b", "c"], "raw_text": ["x", "y", "z"],
                          "summary_status": ["ok", "error", "missing"]})
    assert cov.chunks_without_summary(texts) == 2
    assert cov.chunks_without_summary(texts.drop(columns="summary_status")) == 0
    coverage = pd.DataFrame({"in_no_chunk": [0], "messages": [3]})
    losses = pd.DataFrame(columns=["question_id", "stage", "reason"])
    [line] = cov.coverage_warnings(coverage, losses, ChunkingSection(), unsummarized=(2, 3))
    assert line.startswith("2 of 3 chunks have no summary (their summarizer call failed)")
    assert cov.coverage_warnings(coverage, losses, ChunkingSection(), unsummarized=(0, 3)) == []
