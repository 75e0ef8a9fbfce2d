"""What a study loses before any retriever ranks anything: messages in no chunk, questions dropped, and
primary evidence a retriever never sees (paper §3.2–3.3, §4.2); and chunks whose summary call failed.

Three losses, each measured from the store's frames and the params sections that caused it:

* **Messages in no chunk** (:func:`messages_in_no_chunk`, :func:`chunk_coverage`).  A message is chunked
  when ``chunk_messages`` links it to a chunk.  With ``chunking.trim_policy: fixed`` (the paper's loop) the
  messages trimmed off a window's end are in no chunk unless the next window's overlap reaches them;
  ``resume`` leaves none out.
* **Questions dropped** (:func:`question_losses`, :func:`losses_by_reason`): one row per question read, with
  the stage that dropped it and why, in this order of precedence: ``ingest`` (refused by the reader: the
  ``rejections`` table, kind ``question``), ``params`` (``type excluded by params: <type>``), ``questions``
  (the question file gives no primary evidence, only supporting), ``chunking`` (no primary evidence message
  in any chunk: no chunk is primary gold, §4.2), else ``evaluated``.  An evaluated question whose primary
  evidence is partly in no chunk says so: its gold holds only the chunks of the rest, so its recall cannot
  show the loss.
* **Evidence a retriever does not see** (:func:`evidence_visibility`).  For every evaluated question, every
  primary evidence message (relevance 2) and every retriever R: is the message's line (``render_line``,
  its exact place in raw_text) in the text R scores?  Per chunk holding the message, the characters of
  raw_text that reach R's text are, and the reason a loss there gets:

  - ``raw_text`` with a whole-text method: all of them;
  - ``raw_text_vector``: the head and tail that the ``embedding.max_chars`` cut keeps ("outside the
    embedding cut");
  - ``embedding_text`` with a whole-text method: the excerpt, the first ``representations.excerpt_chars``
    ("outside the excerpt");
  - ``embedding_text_vector``: the excerpt ("outside the excerpt"), then what of it survives the cut of the
    whole embedding_text, whose prefix, summary and label come first and take head room ("outside the
    embedding cut");
  - ``summary`` with any method: the summarizer's input, the first ``summarizer.max_input_chars``
    ("outside the summarizer's input"); nothing when the chunk has no summary ("chunk has no summary").

  - the ablation's ``excerpt`` and ``summary_excerpt`` like embedding_text ("outside the excerpt", then the
    embedding cut for a method that reads one embedding); ``prefix`` shows no chat text ("representation holds
    no chat text").

  With ``embedding.long_text: window_average`` every window of the whole text is embedded: no embedding cut.
  "Whole text" is bm25 and every method whose component does not read one embedding of the cut text
  (:meth:`~pmrag.retrieve.retrievers.RetrieverComponent.reads_embedding_cut`: vector, graph and the methods
  that score with a representation's chunk vectors do).  A
  summary is generated, so the best measurable statement is whether the message was in the summarizer's
  input: a message inside it may still be absent from the summary (``summary_*`` rows state an upper
  bound), and the embedding cut of a long summary is not mapped back.  For ``embedding_text`` with a
  whole-text method only the excerpt counts; the summary part of that text is not credited either.

  These sets are not re-derived: each chunk's raw_text is replaced by a *tagged* copy of the same length
  (character i → code point U+10000 + i) and the pipeline's own builders run on it
  (:func:`~pmrag.represent.embed.shorten_for_embedding`,
  :meth:`~pmrag.represent.representations.EmbeddingTextTemplate.build`,
  :func:`~pmrag.represent.representations.summary_input`); the characters whose tags come out are the ones
  R sees.  (Characters of the prefix, label or summary at or above U+10000 are replaced by U+FFFD first:
  lengths stay the same.)  A message is **shown** to R when all characters of its line reach R's text in
  at least one chunk holding it, **partly** shown when some do, **hidden** when none do (or it is in no
  chunk: reason ``in no chunk``).  A not-shown message's reason is that of the chunk showing most of its
  line (ties: the chunk where it got furthest), naming the first cut that removed characters there.

Beside them, **chunks without a summary** (:func:`chunks_without_summary`): under ``summarizer.failure_policy:
retry`` a chunk whose call still failed after its retries is recorded as an error and the study goes on.  The
paper is silent here (all its chunks were summarized); pmrag gives such a chunk an empty summary, so the
``summary`` retrievers cannot find it and its embedding_text holds the prefix, label and excerpt only (its
evidence is counted hidden from ``summary_*`` with reason "chunk has no summary"), says how many there are in the
study's warnings, and calls the model again for them, and only them, on the next ``pmrag study``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pmrag.chunking.windows import ChunkMessage, render_line
from pmrag.core.arrays import run_bounds
from pmrag.core.errors import PmragError
from pmrag.core.frames import require_columns
from pmrag.core.names import RetrieverId
from pmrag.core.params import ChunkingSection, EmbeddingSection, RepresentationsSection, SummarizerSection
from pmrag.evaluate.metric_names import RECALL5
from pmrag.evaluate.metrics import PRIMARY
from pmrag.represent.embed import shorten_for_embedding
from pmrag.represent.representations import EmbeddingTextTemplate, summary_input

IN_NO_CHUNK = "in no chunk"
OUTSIDE_EMBEDDING_CUT = "outside the embedding cut"
OUTSIDE_EXCERPT = "outside the excerpt"
OUTSIDE_SUMMARIZER_INPUT = "outside the summarizer's input"
NO_SUMMARY = "chunk has no summary"
NO_CHAT_TEXT = "representation holds no chat text"
STATUSES = ("shown", "partly", "hidden")
LOSS_STAGES = ("ingest", "params", "questions", "chunking", "evaluated")
NO_PRIMARY_GIVEN = "no primary evidence given (only supporting evidence)"
NO_PRIMARY_IN_CHUNK = "no primary evidence message in any chunk"
EVALUABLE = "evaluable"
EVALUABLE_PART_LOST = "evaluable, but some primary evidence messages are in no chunk"
TAG_BASE = 0x10000
MAX_TAGGED_CHARS = 0x110000 - TAG_BASE   # 1,048,576 characters of raw_text can be tagged


# --------------------------------------------------------------------------------- messages in no chunk

def messages_in_no_chunk(messages: pd.DataFrame, chunk_messages: pd.DataFrame) -> pd.DataFrame:
    """The messages no chunk holds (``message_id, source, source_order, occurred_at``), by source and time.

    A message is chunked when ``chunk_messages`` (``chunk_id, position, message_id``) links it to a chunk.
    """
    require_columns(messages, ["message_id", "source", "source_order", "occurred_at"], "messages")
    require_columns(chunk_messages, ["message_id"], "chunk_messages")
    left = messages.loc[~messages["message_id"].isin(chunk_messages["message_id"]),
                        ["message_id", "source", "source_order", "occurred_at"]]
    return left.sort_values(["source", "occurred_at", "source_order", "message_id"]).reset_index(drop=True)


def chunk_coverage(messages: pd.DataFrame, chunk_messages: pd.DataFrame) -> pd.DataFrame:
    """Per source (name order): ``messages``, ``in_no_chunk`` and ``share_in_no_chunk`` (0–1)."""
    require_columns(messages, ["message_id", "source"], "messages")
    require_columns(chunk_messages, ["message_id"], "chunk_messages")
    frame = pd.DataFrame({"source": messages["source"].to_numpy(),
                          "left": ~messages["message_id"].isin(chunk_messages["message_id"]).to_numpy()})
    table = frame.groupby("source", sort=True)["left"].agg(messages="size", in_no_chunk="sum").reset_index()
    table["in_no_chunk"] = table["in_no_chunk"].astype(int)
    table["share_in_no_chunk"] = table["in_no_chunk"] / table["messages"]
    return table


def session_coverage(sessions: pd.DataFrame) -> pd.DataFrame:
    """:func:`chunk_coverage` from each session's counts (``source``, ``messages``, ``in_no_chunk``: counted while
    chunking, :attr:`pmrag.chunking.store.Chunked.sessions`), every message being in one session."""
    require_columns(sessions, ["source", "messages", "in_no_chunk"], "sessions")
    table = sessions.groupby("source", sort=True)[["messages", "in_no_chunk"]].sum().reset_index()
    table = table.astype({"messages": "int64", "in_no_chunk": "int64"})
    table["share_in_no_chunk"] = table["in_no_chunk"] / table["messages"]
    return table


# ------------------------------------------------------------------------------------- questions dropped

def question_losses(questions: pd.DataFrame, question_evidence: pd.DataFrame, chunk_messages: pd.DataFrame,
                    rejections: pd.DataFrame | None = None, excluded_types: Collection[str] = ()) -> pd.DataFrame:
    """One row per question read: ``stage, question_id, location, type, n_primary_evidence,
    n_primary_in_no_chunk, evaluated, reason`` (rules: module docstring).

    Parameters
    ----------
    questions, question_evidence, chunk_messages : the store's tables (``question_id, type``;
        ``question_id, message_id, relevance``; ``chunk_id, position, message_id``).
    rejections : the store's ``rejections`` table (``kind, location, reason``); its ``question`` rows become
        ``ingest`` rows (no ``question_id``: the reader never stored one; ``location`` says where it was).
        Their reason is the rejection's reason before its first ``": "`` (the details), quoted values
        shown as ``'…'``, so that one reason counts many questions.
    excluded_types : question types the params leave out (the study's ``EvaluationSet.excluded_types``).

    Returns
    -------
    Store questions in ID order after the ingest rows; ``evaluated`` is True exactly for the questions the
    study scores (primary gold in some chunk, type not excluded).
    """
    require_columns(questions, ["question_id", "type"], "questions")
    require_columns(question_evidence, ["question_id", "message_id", "relevance"], "question_evidence")
    require_columns(chunk_messages, ["message_id"], "chunk_messages")
    primary = question_evidence[question_evidence["relevance"] == PRIMARY]
    chunked = primary["message_id"].isin(chunk_messages["message_id"])
    counts = pd.DataFrame({"question_id": primary["question_id"].to_numpy(), "lost": ~chunked.to_numpy()})
    counts = counts.groupby("question_id")["lost"].agg(n_primary_evidence="size", n_primary_in_no_chunk="sum")
    stored = questions[["question_id", "type"]].sort_values("question_id").reset_index(drop=True)
    stored = stored.join(counts, on="question_id")
    stored[["n_primary_evidence", "n_primary_in_no_chunk"]] = (
        stored[["n_primary_evidence", "n_primary_in_no_chunk"]].fillna(0).astype(int))
    excluded = stored["type"].isin(list(excluded_types))
    no_primary = stored["n_primary_evidence"] == 0
    none_chunked = stored["n_primary_in_no_chunk"] == stored["n_primary_evidence"]
    stage = np.select([excluded, no_primary, none_chunked], ["params", "questions", "chunking"], "evaluated")
    reason = np.select(
        [excluded, no_primary, none_chunked, stored["n_primary_in_no_chunk"] > 0],
        ["type excluded by params: " + stored["type"].astype(str), NO_PRIMARY_GIVEN, NO_PRIMARY_IN_CHUNK,
         EVALUABLE_PART_LOST], EVALUABLE)
    stored.insert(0, "stage", stage)
    stored.insert(2, "location", None)
    stored["evaluated"] = stage == "evaluated"
    stored["reason"] = reason
    return pd.concat([_ingest_losses(rejections), stored], ignore_index=True)


def _ingest_losses(rejections: pd.DataFrame | None) -> pd.DataFrame:
    columns = ["stage", "question_id", "location", "type", "n_primary_evidence", "n_primary_in_no_chunk",
               "evaluated", "reason"]
    if rejections is None:
        return pd.DataFrame(columns=columns)
    require_columns(rejections, ["kind", "location", "reason"], "rejections")
    rows = rejections[rejections["kind"] == "question"]
    return pd.DataFrame({
        "stage": "ingest", "question_id": None, "location": rows["location"].to_numpy(), "type": None,
        "n_primary_evidence": pd.NA, "n_primary_in_no_chunk": pd.NA, "evaluated": False,
        "reason": [reason_kind(r) for r in rows["reason"]],
    }, columns=columns)


def reason_kind(reason: str) -> str:
    """A rejection's reason without its details: the text before the first ``": "``, quoted values as ``'…'``."""
    head = str(reason).split(": ", 1)[0]
    return re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", head)


def losses_by_reason(losses: pd.DataFrame) -> pd.DataFrame:
    """``stage, reason, questions``: :func:`question_losses` counted, stages in pipeline order
    (:data:`LOSS_STAGES`, the evaluated questions last), then most questions first, then reason."""
    require_columns(losses, ["stage", "reason"], "question losses")
    table = losses.groupby(["stage", "reason"], sort=False).size().rename("questions").reset_index()
    table["order"] = table["stage"].map({s: i for i, s in enumerate(LOSS_STAGES)})
    table = table.sort_values(["order", "questions", "reason"], ascending=[True, False, True], kind="stable")
    return table.drop(columns="order").reset_index(drop=True)


# ----------------------------------------------------------------------------- where evidence lines are

def evidence_lines(question_evidence: pd.DataFrame, messages: pd.DataFrame, chunk_messages: pd.DataFrame,
                   chunks: pd.DataFrame, question_ids: Collection[str] | None = None) -> pd.DataFrame:
    """Where each primary evidence message's line is in each chunk holding it.

    One row per (question, primary evidence message, chunk holding it): ``question_id, message_id, chunk_id,
    start, end, line_chars`` with ``raw_text[start:end]`` the message's line (:func:`render_line`, lines
    joined by one newline as the chunker joins them); a message in no chunk has one row with ``chunk_id``
    None and ``start``/``end`` NA.  Only the chunks holding evidence are rendered, and each is checked
    against its stored raw_text (a :class:`PmragError` names a chunk whose text is stale).

    ``question_ids`` limits the questions (default: every question with primary evidence).
    """
    require_columns(messages, ["message_id", "source", "source_order", "occurred_at", "sender", "text"], "messages")
    require_columns(chunks, ["chunk_id", "raw_text"], "chunks")
    evidence, links = _evidence_links(question_evidence, chunk_messages, question_ids)
    lines = _rendered(messages, pd.unique(pd.concat([links["message_id"], evidence["message_id"]])))
    unknown = pd.concat([links["message_id"], evidence["message_id"]])
    unknown = unknown[~unknown.isin(lines.index)]
    if len(unknown):
        raise PmragError(f"message {unknown.iloc[0]!r} (in chunk_messages or question_evidence) is not in messages; "
                         "rerun the ingest and chunks stages")
    lengths = lines.str.len()
    step = links["message_id"].map(lengths).to_numpy(dtype=np.int64) + 1
    ends = np.cumsum(step)
    first = links.groupby("chunk_id", sort=False).cumcount().to_numpy() == 0
    base = np.maximum.accumulate(np.where(first, ends - step, 0)) if len(step) else step
    links = links.assign(start=ends - step - base, end=ends - 1 - base)
    _check_raw_text(links, chunks, lines[lines.index.isin(evidence["message_id"])])
    spans = links.loc[links["message_id"].isin(evidence["message_id"]), ["chunk_id", "message_id", "start", "end"]]
    rows = evidence.merge(spans, on="message_id", how="left", sort=False)
    rows["line_chars"] = rows["message_id"].map(lengths).astype(int)
    rows[["start", "end"]] = rows[["start", "end"]].astype("Int64")
    rows["chunk_id"] = rows["chunk_id"].astype(object).where(rows["chunk_id"].notna(), None)
    return rows.sort_values(["question_id", "message_id", "chunk_id"], na_position="last").reset_index(drop=True)[
        ["question_id", "message_id", "chunk_id", "start", "end", "line_chars"]]


def evidence_messages(question_evidence: pd.DataFrame, chunk_messages: pd.DataFrame,
                      question_ids: Collection[str] | None = None) -> list[str]:
    """The messages :func:`evidence_lines` renders (sorted ids): the primary evidence of the questions
    (``question_ids``, default every question) and every message of each chunk holding some of it.  A
    ``messages`` frame holding these is enough for :func:`evidence_lines` and :func:`evidence_visibility`."""
    evidence, links = _evidence_links(question_evidence, chunk_messages, question_ids)
    return sorted(set(links["message_id"]) | set(evidence["message_id"]))


def _evidence_links(question_evidence: pd.DataFrame, chunk_messages: pd.DataFrame,
                    question_ids: Collection[str] | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The questions' primary evidence (``question_id, message_id``, distinct, sorted) and the links of every
    chunk holding some of it (by chunk and position)."""
    require_columns(question_evidence, ["question_id", "message_id", "relevance"], "question_evidence")
    require_columns(chunk_messages, ["chunk_id", "position", "message_id"], "chunk_messages")
    evidence = question_evidence.loc[question_evidence["relevance"] == PRIMARY, ["question_id", "message_id"]]
    if question_ids is not None:
        evidence = evidence[evidence["question_id"].isin(list(question_ids))]
    evidence = evidence.drop_duplicates().sort_values(["question_id", "message_id"]).reset_index(drop=True)
    holding = chunk_messages[chunk_messages["message_id"].isin(evidence["message_id"])]
    links = chunk_messages[chunk_messages["chunk_id"].isin(holding["chunk_id"])].sort_values(["chunk_id", "position"])
    return evidence, links


def _rendered(messages: pd.DataFrame, ids) -> pd.Series:
    """``message_id → line`` as :func:`render_line` writes it into raw_text."""
    rows = messages[messages["message_id"].isin(list(ids))]
    lines = [render_line(ChunkMessage(mid, src, order, pd.Timestamp(at).to_pydatetime(), sender, text))
             for mid, src, order, at, sender, text in rows[["message_id", "source", "source_order", "occurred_at",
                                                             "sender", "text"]].itertuples(index=False)]
    return pd.Series(lines, index=rows["message_id"].to_numpy(), dtype=object)


def _check_raw_text(links: pd.DataFrame, chunks: pd.DataFrame, evidence_lines: pd.Series) -> None:
    """Every rendered chunk's length, and every evidence line at its place, must match the stored raw_text."""
    raw = chunks.drop_duplicates("chunk_id").set_index("chunk_id")["raw_text"]
    last = links.groupby("chunk_id", sort=False)["end"].last()
    stored = raw.reindex(last.index)
    bad = stored.isna() | (stored.fillna("").str.len() != last)
    mine = links[links["message_id"].isin(evidence_lines.index)]
    for chunk, message, start, end in mine[["chunk_id", "message_id", "start", "end"]].itertuples(index=False):
        if not bad[chunk] and stored[chunk][start:end] != evidence_lines[message]:
            bad[chunk] = True
    if bad.any():
        raise PmragError(f"chunk {bad.index[bad.to_numpy()][0]!r}: its raw_text is not its messages' lines as the "
                         "chunker renders them (or it is missing from chunks); the chunks are stale: rerun the chunks stage")


# -------------------------------------------------------------------------------- evidence visibility

def _kind(rid: RetrieverId) -> str:
    """What of raw_text a retriever can see depends on its representation and on whether it scores one embedding
    of the (cut) whole text (``reads_embedding_cut`` of its component: vector, and the methods built on it)."""
    from pmrag.retrieve.registry import RETRIEVERS

    if rid.representation in ("summary", "prefix"):
        return rid.representation
    cut = rid.method in RETRIEVERS and RETRIEVERS.get(rid.method).reads_embedding_cut(rid)
    return f"{rid.representation}:{'vector' if cut else 'whole'}"


def evidence_visibility(question_evidence: pd.DataFrame, messages: pd.DataFrame, chunk_messages: pd.DataFrame,
                        texts: pd.DataFrame, retrievers: Iterable[RetrieverId | str], *,
                        embedding: EmbeddingSection, representations: RepresentationsSection,
                        summarizer: SummarizerSection, question_ids: Collection[str] | None = None) -> pd.DataFrame:
    """Whether each retriever sees each primary evidence message (rules: module docstring).

    Parameters
    ----------
    question_evidence, messages, chunk_messages : the store's tables.
    texts : one row per chunk, ``chunk_id, raw_text`` plus ``summary`` when a ``summary`` or
        ``embedding_text`` retriever is asked (the study's ``representations()``; an optional
        ``summary_status`` other than ``ok``, or an empty summary, means the chunk has no summary; an optional
        ``embedding_text`` is checked against what ``representations`` builds).
    retrievers : names or :class:`RetrieverId`.
    embedding, representations, summarizer : the params sections that cut the texts.
    question_ids : the questions to cover (default: every question with primary evidence; pass the study's
        evaluated questions).

    Returns
    -------
    One row per (retriever, question, primary evidence message), retrievers in the given order:
    ``retriever, question_id, message_id, status`` (shown / partly / hidden), ``reason`` ("" when shown),
    ``visible_chars, line_chars, n_chunks`` (chunks holding the message).
    """
    rids = list(dict.fromkeys(RetrieverId.parse(str(r)) for r in retrievers))
    if not rids:
        raise ValueError("retrievers is empty; name at least one retriever")
    kinds = list(dict.fromkeys(_kind(r) for r in rids))
    needs_summary = any(k.startswith(("summary", "embedding_text")) for k in kinds)
    require_columns(texts, ["chunk_id", "raw_text"] + (["summary"] if needs_summary else []), "texts")
    lines = evidence_lines(question_evidence, messages, chunk_messages, texts, question_ids)
    chunked = lines[lines["chunk_id"].notna()]
    per_kind = _chunk_visibility(chunked, texts, kinds, embedding, representations, summarizer)
    n_chunks = chunked.groupby("message_id").size()
    pairs = lines.drop_duplicates(["question_id", "message_id"])[["question_id", "message_id", "line_chars"]]
    frames = []
    for rid in rids:
        best = per_kind[_kind(rid)]
        rows = pairs.join(best, on="message_id")
        rows["visible_chars"] = rows["visible_chars"].fillna(0).astype(int)
        rows["reason"] = rows["reason"].fillna(IN_NO_CHUNK)
        rows["status"] = np.select([rows["visible_chars"] == rows["line_chars"], rows["visible_chars"] > 0],
                                   ["shown", "partly"], "hidden")
        rows.loc[rows["status"] == "shown", "reason"] = ""
        rows["n_chunks"] = rows["message_id"].map(n_chunks).fillna(0).astype(int)
        rows.insert(0, "retriever", str(rid))
        frames.append(rows[["retriever", "question_id", "message_id", "status", "reason", "visible_chars",
                            "line_chars", "n_chunks"]])
    return pd.concat(frames, ignore_index=True)


def _chunk_visibility(chunked: pd.DataFrame, texts: pd.DataFrame, kinds: Sequence[str], embedding: EmbeddingSection,
                      representations: RepresentationsSection, summarizer: SummarizerSection) -> dict[str, pd.DataFrame]:
    """Per kind: ``message_id → visible_chars, reason`` of the chunk that shows the most of it."""
    template = EmbeddingTextTemplate.from_prompts(representations.prompts, representations.excerpt_chars)
    clean = dataclasses.replace(template, prefix=_untagged(template.prefix), excerpt_label=_untagged(template.excerpt_label))
    spans = chunked.drop_duplicates(["chunk_id", "message_id"]).sort_values(["chunk_id", "start"], kind="stable")
    chunk_ids = spans["chunk_id"].to_numpy(dtype=object)
    starts, ends = spans["start"].to_numpy(dtype=np.int64), spans["end"].to_numpy(dtype=np.int64)
    bounds = run_bounds(chunk_ids)
    wanted = texts[texts["chunk_id"].isin(pd.unique(chunk_ids))].drop_duplicates("chunk_id")
    raws, summaries = _by_chunk(wanted, "raw_text", ""), _by_chunk(wanted, "summary", "")
    statuses = _by_chunk(wanted, "summary_status", "ok")
    built = _by_chunk(wanted, "embedding_text", None) if any(k.startswith("embedding_text") for k in kinds) else {}
    longest = max((len(raws[c]) for c in chunk_ids[bounds[:-1]]), default=0)
    tags = _tags(longest, next((c for c in chunk_ids[bounds[:-1]] if len(raws[c]) == longest), ""))
    reasons = ["", NO_SUMMARY, OUTSIDE_EXCERPT, OUTSIDE_EMBEDDING_CUT, OUTSIDE_SUMMARIZER_INPUT, NO_CHAT_TEXT]
    code = {reason: index for index, reason in enumerate(reasons)}
    visible = {kind: np.zeros(len(spans), dtype=np.int64) for kind in kinds}
    lost = {kind: np.zeros(len(spans), dtype=np.int64) for kind in kinds}
    why = {kind: np.zeros(len(spans), dtype=np.int64) for kind in kinds}
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        chunk_id = chunk_ids[lo]
        raw = raws[chunk_id]
        summary = summaries[chunk_id] if isinstance(summaries[chunk_id], str) else ""
        if built.get(chunk_id) is not None and template.build(summary, raw) != built[chunk_id]:
            raise PmragError(f"chunk {chunk_id!r}: its embedding_text is not what representations.prompts and "
                             "excerpt_chars build from its summary and raw_text; pass the study's representations section")
        tagged, summary = tags[:len(raw)], _untagged(summary)
        for kind in kinds:
            stages = _stages(kind, tagged, summary, statuses[chunk_id], clean, embedding, summarizer)
            shown, lost_at = _visible(stages, starts[lo:hi], ends[lo:hi], len(raw))
            visible[kind][lo:hi], lost[kind][lo:hi] = shown, lost_at
            why[kind][lo:hi] = [code[stages[i][0]] if i < len(stages) else 0 for i in lost_at]
    best = {}
    message_ids = spans["message_id"].to_numpy(dtype=object)
    for kind in kinds:
        frame = pd.DataFrame({"message_id": message_ids, "visible_chars": visible[kind], "lost_at": lost[kind],
                              "reason": np.asarray(reasons, dtype=object)[why[kind]]})
        frame = frame.sort_values(["message_id", "visible_chars", "lost_at"], ascending=[True, False, False], kind="stable")
        best[kind] = frame.drop_duplicates("message_id").set_index("message_id")[["visible_chars", "reason"]]
    return best


def _by_chunk(texts: pd.DataFrame, column: str, default) -> dict:
    """``chunk_id → texts[column]`` (``default`` for every chunk when there is no such column)."""
    if column not in texts.columns:
        return dict.fromkeys(texts["chunk_id"], default)
    return dict(zip(texts["chunk_id"], texts[column]))


def _stages(kind: str, tagged: str, summary: str, status, template: EmbeddingTextTemplate,
            embedding: EmbeddingSection, summarizer: SummarizerSection) -> list[tuple[str, str]]:
    """The texts a kind's retriever is built from, in pipeline order, each with the reason a loss there gets."""
    def cut(text: str) -> list[tuple[str, str]]:
        if embedding.long_text == "window_average":   # every window of the whole text is embedded
            return []
        return [(OUTSIDE_EMBEDDING_CUT, shorten_for_embedding(text, embedding.max_chars, embedding.head_fraction))]

    vector = kind.endswith(":vector")
    if kind == "prefix":
        return [(NO_CHAT_TEXT, "")]
    if kind.startswith("raw_text"):
        return cut(tagged) if vector else []
    builders = {"embedding_text": template.build, "summary_excerpt": template.build_without_prefix,
                "excerpt": lambda _summary, raw: template.excerpt(raw)}
    representation = kind.partition(":")[0]
    if representation in builders:
        built = builders[representation](summary, tagged)
        return [(OUTSIDE_EXCERPT, built)] + (cut(built) if vector else [])
    if status != "ok" or not summary:
        return [(NO_SUMMARY, "")]
    return [(OUTSIDE_SUMMARIZER_INPUT, summary_input(tagged, summarizer.max_input_chars))]


def _visible(stages: list[tuple[str, str]], starts: np.ndarray, ends: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per line ``[start, end)``: characters left after the last stage, and the index of the first stage that
    removed some (``len(stages)`` when none did)."""
    visible = ends - starts
    lost_at = np.full(len(starts), len(stages), dtype=np.int64)
    for index, (_, text) in enumerate(stages):
        codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4").astype(np.int64) - TAG_BASE
        kept = np.zeros(n + 1, dtype=np.int64)
        kept[codes[(codes >= 0) & (codes < n)] + 1] = 1
        cumulative = np.cumsum(kept)
        visible = cumulative[ends] - cumulative[starts]
        lost_at = np.where((lost_at == len(stages)) & (visible < ends - starts), index, lost_at)
    return visible, lost_at


def _tags(n: int, chunk_id: str) -> str:
    """The tags of raw_text positions 0 … n − 1: code points U+10000 + i."""
    if n > MAX_TAGGED_CHARS:
        raise PmragError(f"chunk {chunk_id!r}: raw_text of {n:,} characters is longer than coverage can trace "
                         f"({MAX_TAGGED_CHARS:,})")
    return "".join(map(chr, range(TAG_BASE, TAG_BASE + n)))


def _untagged(text: str) -> str:
    """``text`` with every character at or above U+10000 replaced by U+FFFD (same length: no tag in it)."""
    return re.sub("[\U00010000-\U0010ffff]", "\ufffd", text)


# ----------------------------------------------------------------------------------- per question, summary

def visibility_by_question(visibility: pd.DataFrame) -> pd.DataFrame:
    """Per (retriever, question): ``n_primary_evidence, n_shown, n_partly, n_hidden, all_shown, all_hidden``."""
    require_columns(visibility, ["retriever", "question_id", "status"], "evidence visibility")
    flags = visibility.assign(**{f"n_{s}": (visibility["status"] == s).astype(int) for s in STATUSES})
    table = flags.groupby(["retriever", "question_id"], sort=False).agg(
        n_primary_evidence=("status", "size"), n_shown=("n_shown", "sum"), n_partly=("n_partly", "sum"),
        n_hidden=("n_hidden", "sum")).reset_index()
    table["all_shown"] = table["n_shown"] == table["n_primary_evidence"]
    table["all_hidden"] = table["n_hidden"] == table["n_primary_evidence"]
    return table


def visibility_summary(visibility: pd.DataFrame) -> pd.DataFrame:
    """Per retriever (given order): ``evidence_messages, shown, partly, hidden, share_partly, share_hidden,
    questions, questions_all_shown, questions_some_hidden`` (≥ 1 hidden) ``, questions_all_hidden``."""
    per_question = visibility_by_question(visibility)
    messages = per_question.groupby("retriever", sort=False).agg(
        evidence_messages=("n_primary_evidence", "sum"), shown=("n_shown", "sum"), partly=("n_partly", "sum"),
        hidden=("n_hidden", "sum"), questions=("question_id", "size"), questions_all_shown=("all_shown", "sum"),
        questions_some_hidden=("n_hidden", lambda n: int((n > 0).sum())), questions_all_hidden=("all_hidden", "sum"))
    messages.insert(4, "share_partly", messages["partly"] / messages["evidence_messages"])
    messages.insert(5, "share_hidden", messages["hidden"] / messages["evidence_messages"])
    return messages.reset_index().astype({c: int for c in ("questions_all_shown", "questions_all_hidden")})


def visibility_reasons(visibility: pd.DataFrame) -> pd.DataFrame:
    """``retriever, status, reason, evidence_messages`` for the messages not shown (retrievers in given order)."""
    require_columns(visibility, ["retriever", "status", "reason"], "evidence visibility")
    missing = visibility[visibility["status"] != "shown"]
    return missing.groupby(["retriever", "status", "reason"], sort=False).size().rename("evidence_messages").reset_index()


def recall_by_visibility(by_question: pd.DataFrame, per_question_metrics: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """Recall@k of each retriever on the questions whose primary evidence it sees in full vs the rest.

    ``by_question``: :func:`visibility_by_question`.  ``per_question_metrics``: the study's metric rows,
    ``retriever, question_id, recall@k`` (wide, as :func:`pmrag.evaluate.metrics.per_question_rows`) or long
    (``retriever, question_id, metric, value``).  Only (retriever, question) pairs in both count.

    Returns one row per retriever (``by_question`` order): ``questions_all_shown, recall_all_shown,
    questions_not_all_shown`` (some evidence partly shown or hidden) ``, recall_not_all_shown`` (NaN for
    no question) and ``difference`` (not-all-shown minus all-shown).
    """
    column = str(RECALL5.at(k))
    require_columns(by_question, ["retriever", "question_id", "all_shown"], "visibility by question")
    metrics = per_question_metrics
    if column not in metrics.columns and {"metric", "value"} <= set(metrics.columns):
        metrics = metrics[metrics["metric"] == column].rename(columns={"value": column})
    require_columns(metrics, ["retriever", "question_id", column], "per-question metrics")
    joined = by_question.merge(metrics[["retriever", "question_id", column]], on=["retriever", "question_id"])
    if joined.empty:
        raise ValueError("no (retriever, question_id) pair is in both the visibility rows and the metric rows")
    rows = []
    for retriever in pd.unique(by_question["retriever"]):
        mine = joined[joined["retriever"] == retriever]
        if mine.empty:
            continue
        shown, rest = mine.loc[mine["all_shown"], column], mine.loc[~mine["all_shown"], column]
        rows.append({"retriever": retriever, "questions_all_shown": len(shown), "recall_all_shown": shown.mean(),
                     "questions_not_all_shown": len(rest), "recall_not_all_shown": rest.mean()})
    table = pd.DataFrame(rows)
    table["difference"] = table["recall_not_all_shown"] - table["recall_all_shown"]
    return table


# ---------------------------------------------------------------------------------------------- warnings

def chunks_without_summary(texts: pd.DataFrame) -> int:
    """Chunks whose ``summary_status`` is not ``ok`` (their summary call failed under ``failure_policy: retry``,
    or was never made): the paper has none (every chunk was summarized), so what pmrag does with them is its own
    choice (:func:`~pmrag.represent.representations.build_representations`): the summary is empty, embedding_text
    keeps its prefix, label and excerpt, and the next ``pmrag study`` calls the model again for them.  0 when
    ``texts`` has no ``summary_status``."""
    if "summary_status" not in texts:
        return 0
    return int((texts["summary_status"] != "ok").sum())


def coverage_warnings(coverage: pd.DataFrame, losses: pd.DataFrame, chunking: ChunkingSection,
                      summary: pd.DataFrame | None = None, unsummarized: tuple[int, int] = (0, 0)) -> list[str]:
    """One line per loss, for a stage to print and a README to show (empty when nothing is lost).

    ``coverage``: :func:`chunk_coverage`; ``losses``: :func:`question_losses`; ``summary``:
    :func:`visibility_summary` (optional); ``unsummarized``: chunks without a summary
    (:func:`chunks_without_summary`) and all chunks.
    """
    lines = []
    missing, chunks = unsummarized
    if missing:
        lines.append(f"{missing:,} of {chunks:,} chunks have no summary (their summarizer call failed): their summary "
                     "is empty, so summary retrievers cannot find them, and their embedding_text holds the prefix, "
                     "label and excerpt only; the next `pmrag study` calls the model again for them")
    left, total = int(coverage["in_no_chunk"].sum()), int(coverage["messages"].sum())
    if left:
        why = ("chunking.trim_policy is 'fixed' (the paper's loop): messages trimmed off a window's end are in no "
               "chunk unless the next window's overlap reaches them; 'resume' leaves none out"
               if chunking.trim_policy == "fixed" else f"chunking.trim_policy is {chunking.trim_policy!r}")
        lines.append(f"{left:,} of {total:,} messages ({left / total:.1%}) are in no chunk, so no retriever can find "
                     f"them: {why}")
    n_questions = len(losses)
    for row in losses_by_reason(losses).itertuples(index=False):
        if row.stage != "evaluated":
            lines.append(f"{row.questions:,} of {n_questions:,} questions are not evaluated ({row.stage}): {row.reason}")
        elif row.reason == EVALUABLE_PART_LOST:
            lines.append(f"{row.questions:,} evaluated questions have primary evidence in no chunk: their gold holds only "
                         "the chunks of the rest, so their recall cannot show the loss")
    for row in (summary.itertuples(index=False) if summary is not None else ()):
        if row.hidden or row.partly:
            lines.append(f"{row.retriever}: {row.hidden:,} of {row.evidence_messages:,} primary evidence messages "
                         f"({row.share_hidden:.0%}) hidden from it and {row.partly:,} partly shown; "
                         f"{row.questions_all_hidden:,} of {row.questions:,} questions have all of it hidden")
    return lines


# ---------------------------------------------------------------------------------------------- the whole report

@dataclass(frozen=True)
class Coverage:
    """What the study loses before any retriever ranks: messages in no chunk per source, every question's fate
    and the count by reason, each retriever's view of the primary evidence (per message, per question, summed,
    by reason), and the one-line warnings ``pmrag study`` prints."""

    chunk_coverage: pd.DataFrame
    losses: pd.DataFrame
    losses_by_reason: pd.DataFrame
    evidence_ids_dropped: int        # LoCoMo evidence ids that named no turn (dropped at ingest)
    visibility: pd.DataFrame
    by_question: pd.DataFrame
    summary: pd.DataFrame
    reasons: pd.DataFrame
    warnings: tuple[str, ...]
    chunks_without_summary: int = 0  # their summary call failed (:func:`chunks_without_summary`)


def coverage_report(coverage: pd.DataFrame, messages: pd.DataFrame, chunk_messages: pd.DataFrame,
                    question_evidence: pd.DataFrame, questions: pd.DataFrame, rejections: pd.DataFrame,
                    texts: pd.DataFrame, retrievers: Iterable[RetrieverId | str], evaluated: Collection[str],
                    excluded_types: Collection[str], *, chunking: ChunkingSection, embedding: EmbeddingSection,
                    representations: RepresentationsSection, summarizer: SummarizerSection) -> Coverage:
    """Every loss of a study (module docstring) from its store's tables, its representations (``texts``), its
    retrievers, its evaluated question IDs and the question types its params exclude.

    ``coverage`` is :func:`chunk_coverage` of every message (:func:`session_coverage` counts it from the
    sessions chunking counted); ``messages`` need hold only the :func:`evidence_messages` of the ``evaluated``
    questions (a study at scale reads those few thousand, not its millions)."""
    losses = question_losses(questions, question_evidence, chunk_messages, rejections, excluded_types)
    visibility = evidence_visibility(question_evidence, messages, chunk_messages, texts, retrievers,
                                     embedding=embedding, representations=representations, summarizer=summarizer,
                                     question_ids=evaluated)
    summary = visibility_summary(visibility)
    dropped = int(((rejections["kind"] == "evidence") & (rejections["action"] == "dropped")).sum())
    unsummarized = chunks_without_summary(texts)
    warnings = coverage_warnings(coverage, losses, chunking, summary, (unsummarized, len(texts)))
    if dropped:
        warnings.insert(0, f"{dropped:,} evidence ids named no turn and were dropped at ingest (the questions kept "
                           "their other evidence; see the rejections table, kind 'evidence')")
    return Coverage(coverage, losses, losses_by_reason(losses), dropped, visibility, visibility_by_question(visibility),
                    summary, visibility_reasons(visibility), tuple(warnings), unsummarized)
