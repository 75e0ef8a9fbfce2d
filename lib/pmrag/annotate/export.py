"""From judgments to a study's gold (000 §4.3): qrels, a questions file, the questions dropped.

One annotator's grades (or the adjudicated ones) become

* **qrels** (TREC, :func:`pmrag.evaluate.trec.write_qrels`): every judged chunk of every kept question with its
  grade 0 / 1 / 2, exactly as graded;
* **a questions file** (the format ``dataset.questions`` reads, :mod:`pmrag.ingest.questions_json`):
  message-level evidence, from which a study derives its chunk gold again (a chunk's relevance is the highest
  of the evidence messages it holds, :func:`pmrag.chunking.store.derive_qrels`).

Evidence messages of a chunk graded r ≥ 1 (:func:`evidence_messages`): the messages of that chunk a hint of
the question matched (``hint_matches``: the evidence the question pointed at), else the chunk's own messages
(those no other chunk holds: the study then finds this chunk and no neighbour), else all its messages; each
message takes the highest grade of the chunks that gave it.  A message-level file cannot say "this chunk holds
an evidence message yet is 0", so a grade the study would derive otherwise is counted
(:attr:`GoldExport.regraded`, :attr:`GoldExport.gained`), never hidden.

A question is **dropped**, as the paper dropped 8 of 108, when the annotator dropped it (``question_drops``,
with their reason) or when none of its chunks is graded 2 (no primary gold); dropped questions are reported
and written nowhere.  Adjudicated grades (``annotator="adjudicated"``): the ``adjudications`` row where there
is one, else the grade every annotator who graded the chunk agreed on; a chunk they disagree on without an
adjudication is left out and counted; a question is dropped when every annotator who graded or dropped it
dropped it.

A study reads judgments straight from a store with ``dataset.questions: store:PATH#ANNOTATOR`` (PATH relative
to the params file, ANNOTATOR an annotator id or ``adjudicated``): :func:`parse_store_source`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from sqlalchemy import Engine, select

from pmrag.core.errors import PmragError
from pmrag.core.store import (adjudications, chunk_messages, hint_matches, judgments, question_candidates,
                              question_drops, questions)
from pmrag.evaluate import trec

ADJUDICATED = "adjudicated"
STORE_PREFIX = "store:"
QRELS_NAME, QUESTIONS_NAME = "qrels.trec", "questions.json"


@dataclass(frozen=True)
class GoldExport:
    """What an export holds: the kept questions (``question_id, question, type``), their qrels and evidence,
    the dropped questions (``question_id, reason``), and the reconciliation counts."""

    annotator: str
    questions: pd.DataFrame
    qrels: pd.DataFrame
    evidence: pd.DataFrame
    dropped: pd.DataFrame
    unresolved: int = 0      # adjudicated: chunks annotators disagree on, with no adjudication
    regraded: int = 0        # judged chunks whose grade the message-level evidence would not give back
    gained: int = 0          # unjudged chunks the message-level evidence makes relevant (overlapping windows)

    def lines(self) -> list[str]:
        text = [f"{self.annotator}: {len(self.questions)} question(s) kept, {len(self.qrels)} judged chunk(s) "
                f"({int((self.qrels['relevance'] == 2).sum())} primary, {int((self.qrels['relevance'] == 1).sum())} "
                f"supporting), {len(self.evidence)} evidence message(s); {len(self.dropped)} question(s) dropped"]
        text += [f"  dropped {row.question_id}: {row.reason}" for row in self.dropped.itertuples(index=False)]
        if self.unresolved:
            text.append(f"  {self.unresolved} chunk(s) graded differently and not adjudicated: left out")
        if self.regraded or self.gained:
            text.append(f"  message-level evidence: {self.regraded} judged chunk(s) would be derived with another "
                        f"grade, {self.gained} unjudged chunk(s) would become relevant (they share its messages)")
        return text


def parse_store_source(text: str, base: Path | None = None) -> tuple[Path, str]:
    """``store:PATH#ANNOTATOR`` → (PATH, resolved against ``base``; ANNOTATOR); ``ValueError`` naming what is wrong."""
    if not isinstance(text, str) or not text.startswith(STORE_PREFIX):
        raise ValueError(f"expected '{STORE_PREFIX}PATH#ANNOTATOR'")
    path, sep, annotator = text[len(STORE_PREFIX):].rpartition("#")
    if not sep or not path or not annotator.strip() or annotator != annotator.strip():
        raise ValueError(f"expected '{STORE_PREFIX}PATH#ANNOTATOR' (an annotator id, or '{ADJUDICATED}')")
    path = Path(path)
    return (path if base is None or path.is_absolute() else base / path), annotator


# ------------------------------------------------------------------------------------------- grades

def annotator_grades(engine: Engine, annotator: str) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """One annotator's grades (``question_id, chunk_id, relevance``) and drops (``question_id, reason``), or the
    adjudicated ones (see the module docstring); the third value counts unresolved chunks."""
    with engine.connect() as conn:
        graded = pd.read_sql(select(judgments.c.question_id, judgments.c.chunk_id, judgments.c.annotator,
                                    judgments.c.relevance), conn)
        drops = pd.read_sql(select(question_drops.c.question_id, question_drops.c.annotator, question_drops.c.reason), conn)
        settled = pd.read_sql(select(adjudications.c.question_id, adjudications.c.chunk_id, adjudications.c.relevance), conn)
    if annotator != ADJUDICATED:
        if not (graded["annotator"] == annotator).any() and not (drops["annotator"] == annotator).any():
            known = sorted(set(graded["annotator"]) | set(drops["annotator"]))
            raise PmragError(f"no judgment by annotator {annotator!r} in the store (annotators: "
                             f"{', '.join(known) or 'none'})")
        mine = graded[graded["annotator"] == annotator].drop(columns="annotator")
        return _sorted(mine), drops.loc[drops["annotator"] == annotator, ["question_id", "reason"]], 0
    if graded.empty and settled.empty:
        raise PmragError("no judgment in the store to adjudicate")
    spread = graded.groupby(["question_id", "chunk_id"])["relevance"].agg(["min", "max"]).reset_index()
    agreed = spread[spread["min"] == spread["max"]].rename(columns={"min": "relevance"})[
        ["question_id", "chunk_id", "relevance"]]
    key = ["question_id", "chunk_id"]
    merged = pd.concat([settled, agreed[~agreed.set_index(key).index.isin(settled.set_index(key).index)]])
    unresolved = spread[(spread["min"] != spread["max"])
                        & ~spread.set_index(key).index.isin(settled.set_index(key).index)]
    who = pd.concat([graded[["question_id", "annotator"]], drops[["question_id", "annotator"]]]).drop_duplicates()
    n_who = who.groupby("question_id").size()
    n_drops = drops.groupby("question_id").size()
    all_dropped = n_drops[n_drops == n_who.reindex(n_drops.index)].index
    dropped = (drops[drops["question_id"].isin(all_dropped)].groupby("question_id")["reason"]
               .agg(lambda r: "; ".join(sorted(set(r)))).reset_index())
    return _sorted(merged), dropped, len(unresolved)


def _sorted(grades: pd.DataFrame) -> pd.DataFrame:
    return (grades.astype({"relevance": "int64"}).sort_values(["question_id", "chunk_id"], kind="stable")
            .reset_index(drop=True)[["question_id", "chunk_id", "relevance"]])


def evidence_messages(grades: pd.DataFrame, members: pd.DataFrame, matched: pd.DataFrame) -> pd.DataFrame:
    """Message-level evidence of graded chunks (rule in the module docstring): ``question_id, message_id,
    relevance`` (highest grade per message), by question and message.

    ``members``: ``chunk_id, message_id`` (``chunk_messages``); ``matched``: ``candidate_id, message_id`` (hint
    matches; the candidate id is the question id)."""
    relevant = grades[grades["relevance"] >= 1]
    holders = members.groupby("message_id")["chunk_id"].nunique()
    own = set(holders[holders == 1].index)
    matched_pairs = set(zip(matched["candidate_id"], matched["message_id"]))
    by_chunk = members.groupby("chunk_id")["message_id"].agg(list)
    rows = []
    for question_id, chunk_id, relevance in relevant.itertuples(index=False, name=None):
        held = by_chunk.get(chunk_id, [])
        chosen = ([m for m in held if (question_id, m) in matched_pairs] or [m for m in held if m in own] or held)
        rows += [(question_id, m, int(relevance)) for m in chosen]
    frame = pd.DataFrame(rows, columns=["question_id", "message_id", "relevance"])
    frame = frame.groupby(["question_id", "message_id"], as_index=False)["relevance"].max()
    return frame.sort_values(["question_id", "message_id"], kind="stable").reset_index(drop=True)


def derived_chunk_grades(evidence: pd.DataFrame, members: pd.DataFrame) -> pd.DataFrame:
    """The chunk gold a study derives from message-level evidence: each chunk's highest evidence grade."""
    joined = evidence.merge(members[["chunk_id", "message_id"]], on="message_id")
    return joined.groupby(["question_id", "chunk_id"], as_index=False)["relevance"].max()


# ------------------------------------------------------------------------------------------- the gold

def gold_from_store(engine: Engine, annotator: str) -> GoldExport:
    """The gold of ``annotator`` (or ``"adjudicated"``) in the store: kept questions, qrels, evidence, drops."""
    grades, drops, unresolved = annotator_grades(engine, annotator)
    with engine.connect() as conn:
        members = pd.read_sql(select(chunk_messages.c.chunk_id, chunk_messages.c.message_id), conn)
        matched = pd.read_sql(select(hint_matches.c.candidate_id, hint_matches.c.message_id), conn)
        asked = gradable_questions(conn)
    judged_ids = list(dict.fromkeys([*grades["question_id"], *drops["question_id"]]))
    unknown = [q for q in judged_ids if q not in asked.index]
    if unknown:
        raise PmragError(f"judged question {unknown[0]!r} is neither a question nor an accepted candidate in the store")
    reasons = {q: f"dropped by the annotator ({r})" for q, r in zip(drops["question_id"], drops["reason"])}
    primary = set(grades.loc[grades["relevance"] == 2, "question_id"])
    for q in judged_ids:
        if q not in reasons and q not in primary:
            reasons[q] = "no relevance-2 chunk (no primary gold)"
    placed = set(grades.loc[(grades["relevance"] == 2) & grades["chunk_id"].isin(members["chunk_id"]), "question_id"])
    for q in primary - placed - set(reasons):   # graded on another version of the history: no message to cite
        reasons[q] = "no relevance-2 chunk in the store's history (graded on another version of it)"
    kept_ids = [q for q in sorted(judged_ids) if q not in reasons]
    qrels = grades[grades["question_id"].isin(kept_ids)].reset_index(drop=True)
    evidence = evidence_messages(qrels, members, matched)
    derived = derived_chunk_grades(evidence, members)
    compared = qrels.merge(derived, on=["question_id", "chunk_id"], how="outer", suffixes=("", "_derived"))
    regraded = int((compared["relevance"].notna() & (compared["relevance"] != compared["relevance_derived"].fillna(0))).sum())
    gained = int(compared["relevance"].isna().sum())
    kept = asked.loc[kept_ids].reset_index()
    dropped = pd.DataFrame(sorted(reasons.items()), columns=["question_id", "reason"])
    return GoldExport(annotator, kept, qrels, evidence, dropped, unresolved, regraded, gained)


def gradable_questions(conn) -> pd.DataFrame:
    """Every gradable question: the store's questions and its accepted or edited candidates (their graded text)."""
    study = pd.read_sql(select(questions.c.question_id, questions.c.text.label("question"), questions.c.type,
                               questions.c.tags), conn)
    candidates = pd.read_sql(select(question_candidates).where(question_candidates.c.status.in_(["accepted", "edited"])),
                             conn)
    candidates = pd.DataFrame({"question_id": candidates["candidate_id"], "type": candidates["type"],
                               "question": candidates["edited_text"].where(candidates["edited_text"].notna(),
                                                                           candidates["text"])})
    both = pd.concat([study, candidates[["question_id", "question", "type"]].assign(tags=None)], ignore_index=True)
    return both.drop_duplicates("question_id").set_index("question_id")


def questions_document(gold: GoldExport) -> dict:
    """The questions file (:mod:`pmrag.ingest.questions_json`) of the kept questions."""
    by_question = gold.evidence.groupby("question_id")
    return {"questions": [
        {"question_id": row.question_id, "question": row.question, "type": row.type,
         **({"tags": json.loads(row.tags)} if isinstance(getattr(row, "tags", None), str) else {}),
         "evidence": [{"message_id": m, "relevance": int(r)} for m, r in
                      by_question.get_group(row.question_id)[["message_id", "relevance"]].itertuples(index=False)]}
        for row in gold.questions.itertuples(index=False)]}


def write_gold(gold: GoldExport, out_dir) -> tuple[Path, Path]:
    """Write ``qrels.trec`` and ``questions.json`` into ``out_dir`` (created); returns their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    qrels_path, questions_path = out_dir / QRELS_NAME, out_dir / QUESTIONS_NAME
    try:
        trec.write_qrels(qrels_path, gold.qrels)
    except ValueError as exc:           # a question id with whitespace: not a TREC field
        raise PmragError(f"{qrels_path}: {exc}") from None
    questions_path.write_text(json.dumps(questions_document(gold), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return qrels_path, questions_path


# ------------------------------------------------------------------------------------------- a study's source

def questions_files(source: str | None, params_path: Path | None) -> list[Path]:
    """The files a study's questions depend on: the questions file, or a store and its write-ahead log (the
    grades written since the last checkpoint are there)."""
    if not source:
        return []
    if not source.startswith(STORE_PREFIX):
        return [Path(source)]
    path, _ = parse_store_source(source, params_path.parent if params_path else None)
    return [path, path.with_name(path.name + "-wal")]


def questions_file(source: str, params_path: Path | None, target: Path) -> Path:
    """The questions file a study ingests: ``source`` itself, or, for ``store:PATH#ANNOTATOR``, the annotator's
    gold written to ``target`` (:func:`gold_from_store`; the store is only read)."""
    if not source.startswith(STORE_PREFIX):
        return Path(source)
    from pmrag.core.store import open_store

    path, annotator = parse_store_source(source, params_path.parent if params_path else None)
    engine = open_store(path)
    try:
        gold = gold_from_store(engine, annotator)
    finally:
        engine.dispose()
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    Path(target).write_text(json.dumps(questions_document(gold), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return Path(target)
