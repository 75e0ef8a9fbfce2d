"""A public export of a study (§9.2): aggregates and per-question metrics, nothing that identifies anyone.

``outputs/<run>/public/`` receives:

* ``per_question_metrics.csv``: retriever, question ID, question type and the metric columns, nothing else;
* the aggregate tables (Tables 3–9, the per-type intervals, Figure 6's data) as CSV;
* ``README.md`` saying what is in the folder and what was left out.

Left out, as the paper does: message text, question text, chunk text, names (senders), source names and
timestamps.  Question IDs are pseudonymised by default (``q_`` + the first 12 hex digits of the SHA-1 of
the ID; params ``analysis.public_question_ids``), because a user's own IDs may embed a source or person
name; the mapping back stays private in ``tables/public_question_ids.csv``.

The export is checked, not trusted: every string cell must come from the export's own vocabulary
(retriever names, question types, failure labels, the tables' fixed wording, public IDs) or be a
formatted number, none may look like a date or time, and none may contain a source name, a sender, a
question text or a message text of the study; otherwise it raises :class:`PublicExportError` naming the
table and column, and writes nothing.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from pmrag.core.errors import PmragError
from pmrag.present.artifacts import PUBLIC_TABLES, T

PUBLIC_DIR = "public"
_MONTHS = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_TIMESTAMP = re.compile(
    r"\d{4}\s*[-/.年]\s*\d{1,2}\s*[-/.月]\s*\d{1,2}"        # 2024-04-10, 2024/4/10, 2024.04.10, 2024年4月10日
    r"|\d{1,2}\s*月\s*\d{1,2}\s*日|\d{4}\s*年|\d{1,2}\s*時"   # 4月10日, 2024年, 20時
    r"|(?<![\d.])\d{1,2}/\d{1,2}(?![\d.])|\b\d{1,2}:\d{2}\b"  # 4/10, 20:15
    rf"|(?i:\b{_MONTHS}\s+\d{{1,2}}\b|\b{_MONTHS}\s+\d{{4}}\b|\b\d{{1,2}}\s+{_MONTHS}(?![a-z]))"  # April 10, May 2024, 10 Apr
)
"""Dates and times in the forms a user's question type or ID might carry them (none of our own wording does)."""
MIN_CHECKED_TEXT = 4  # shorter message texts ("笑", "ok") are too common to test for meaningfully


class PublicExportError(PmragError):
    """The public export would contain something private."""


def pseudonym(question_id: str) -> str:
    """``q_`` + the first 12 hex digits of SHA-1(question ID): stable across runs.

    Unsalted on purpose (the same question gets the same public ID in every export), so it hides an ID
    from a reader but does not keep secret an ID that someone can guess and hash.
    """
    return "q_" + hashlib.sha1(str(question_id).encode("utf-8")).hexdigest()[:12]


def public_per_question(per_question: pd.DataFrame, mode: str = "pseudonym") -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(public rows, id map)``: only retriever, question ID, question type and ``metric@k`` columns."""
    if mode not in ("pseudonym", "original"):
        raise ValueError(f"mode must be 'pseudonym' or 'original', got {mode!r}")
    metric_columns = [c for c in per_question.columns if re.fullmatch(r"(recall|mrr|ndcg)@\d+", str(c))]
    public = per_question[["retriever", "question_id", "question_type", *metric_columns]].copy()
    ids = pd.unique(public["question_id"])
    mapping = pd.DataFrame({"question_id": ids, "public_id": [pseudonym(q) if mode == "pseudonym" else q for q in ids]})
    public["question_id"] = public["question_id"].map(dict(zip(mapping["question_id"], mapping["public_id"])))
    return public, mapping


def private_strings(messages: pd.DataFrame, chunks: pd.DataFrame, questions: pd.DataFrame) -> dict[str, set[str]]:
    """What must never appear in the public folder: sources, senders, question and message texts."""
    texts = {t for t in messages["text"].astype(str) if len(t.strip()) >= MIN_CHECKED_TEXT}
    return {
        "source name": set(messages["source"].astype(str)) | set(chunks["source"].astype(str)),
        "sender": set(messages["sender"].astype(str)) - {"SYSTEM"},
        "question text": set(questions["text"].astype(str)),
        "message text": texts,
    }


_WORD_CHAR = re.compile(r"[0-9A-Za-z]")
_WORDS = re.compile(r"[0-9A-Za-z]+")


class PrivateIndex:
    """Finds any private string inside a (short) public cell without scanning every private string.

    Everything is matched as whole words where words exist: a private string that starts (ends) with a Latin
    letter or digit must not be preceded (followed) by one, so a sender called ``A`` is not found inside
    ``BM25 only`` and a message reading ``text`` is not found inside ``contextual``; ``_`` separates words, so
    ``Taro_birthday`` holds the sender ``Taro``.  Japanese has no word boundaries: there any occurrence counts.
    Names (sources, senders) match through one regex per kind; texts (messages, questions) by looking up every
    substring of the cell in a set (a cell of length L costs at most L²/2 lookups, whatever the corpus size).

    ``common_words``: one-word message texts that are also words of the export's own wording (``only``,
    ``Both``) identify nobody and would make every export refuse; they are left out.  Any longer text, any
    name and any question text is always checked.
    """

    NAME_KINDS = ("source name", "sender")

    def __init__(self, private: Mapping[str, set[str]], common_words: Iterable[str] = ()):
        common = set(common_words)
        self.names = []
        self.texts: dict[str, str] = {}
        for kind, strings in private.items():
            strings = sorted((s for s in strings if s), key=len, reverse=True)
            if kind == "message text":
                strings = [s for s in strings if s.strip() not in common]
            if not strings:
                continue
            if kind in self.NAME_KINDS:
                words = "|".join(re.escape(s) for s in strings)
                self.names.append((kind, re.compile(rf"(?<![0-9A-Za-z])(?:{words})(?![0-9A-Za-z])")))
            else:
                self.texts.update((s, kind) for s in strings if s not in self.texts)
        self.shortest = min(map(len, self.texts), default=0)
        self.longest = max(map(len, self.texts), default=0)

    def find(self, value: str) -> str | None:
        """The kind of the first private string found in ``value``, else ``None``."""
        for kind, pattern in self.names:
            if pattern.search(value):
                return kind
        if self.texts:
            n = len(value)
            for start in range(n):
                for end in range(start + self.shortest, min(n, start + self.longest) + 1):
                    text = value[start:end]
                    kind = self.texts.get(text)
                    if kind and _whole_word(value, start, end):
                        return kind
        return None


def _whole_word(value: str, start: int, end: int) -> bool:
    """``value[start:end]`` is not cut out of a longer Latin word (see :class:`PrivateIndex`)."""
    before = start > 0 and _WORD_CHAR.match(value[start]) and _WORD_CHAR.match(value[start - 1])
    after = end < len(value) and _WORD_CHAR.match(value[end - 1]) and _WORD_CHAR.match(value[end])
    return not (before or after)


def check_tables(tables: Mapping[str, pd.DataFrame], vocabulary: set[str], private: Mapping[str, set[str]],
                 user_values: Iterable[str] = ()) -> None:
    """Raise :class:`PublicExportError` for a string cell (or column name) that is outside the export's
    wording and not a formatted number, that holds a date or time, or that contains a private string.

    ``vocabulary`` is the export's own wording (labels, comparisons, retriever names); ``user_values``
    (question types, public IDs) may appear too but come from the user's data.  Every string is checked, the
    wording included, so nothing is laundered by being listed; words of the wording are the only "common
    words" a one-word message may match harmlessly (:class:`PrivateIndex`).  Each distinct string is checked
    once; the error names the first table, column and row holding it, never the value.
    """
    common_words = {word for value in vocabulary for word in _WORDS.findall(value)}
    index = PrivateIndex(private, common_words)
    allowed = set(vocabulary) | set(user_values)
    checked: set[tuple[str, bool]] = set()
    for name, frame in tables.items():
        for column in frame.columns:
            cells = [(None, str(column))] + [(row, v) for row, v in enumerate(frame[column].tolist()) if isinstance(v, str)]
            for row, value in cells:
                if (value, row is None) in checked:
                    continue
                checked.add((value, row is None))
                where = f"public table {name!r}, column {column!r}" + ("" if row is None else f", row {row}")
                if row is not None and value not in allowed and not _is_number_text(value):
                    raise PublicExportError(f"{where}: a value outside the export's vocabulary; nothing written")
                if _TIMESTAMP.search(value):
                    raise PublicExportError(f"{where}: a value that looks like a date or time; nothing written")
                kind = index.find(value)
                if kind:
                    raise PublicExportError(f"{where}: a value containing a {kind} of the study; nothing written")


def _is_number_text(value: str) -> bool:
    """Formatted numbers the tables hold: ``0.427``, ``+0.113``, ``[0.048, 0.184]``, ``17.6%``, ``–``."""
    return bool(re.fullmatch(r"[\s\d.,+\-−%\[\]–]*", value))


def public_tables(reliability, failures, best: str) -> dict[str, pd.DataFrame]:
    """The declared public tables (:data:`~pmrag.present.artifacts.PUBLIC_TABLES`) of a study, by name, from its
    :class:`~pmrag.evaluate.analysis.Reliability` and :class:`~pmrag.evaluate.analysis.FailureAnalysis`."""
    from pmrag.present.tables import table6

    frames = {
        T.bootstrap_cis: reliability.cis, T.table5_differences: reliability.differences,
        T.recall_by_type_cis: reliability.by_type, T.table6_best_hybrid_by_type: table6(reliability.by_type, best),
        T.table7_top5_failures: failures.table7, T.failure_labels: failures.labels,
        T.table8_failure_labels: failures.table8, T.aggregate_detail: failures.aggregate,
        T.topk_sensitivity: failures.sensitivity, T.table9_success_overlap: failures.table9,
    }
    missing = [spec.name for spec in PUBLIC_TABLES if spec not in frames]
    if missing:
        raise ValueError(f"public tables without a source: {', '.join(missing)}")
    return {spec.name: frames[spec] for spec in PUBLIC_TABLES}


def vocabulary(reliability, failures) -> set[str]:
    """The fixed wording the public tables may hold besides numbers, names, types and public IDs."""
    from pmrag.evaluate.failures import LABELS, OVERLAP_PATTERNS

    differences = reliability.differences
    return {
        "overall", "Overall", "all", *LABELS, *OVERLAP_PATTERNS,
        *differences["comparison"], *differences["interpretation"], *differences["metric"],
        *reliability.cis["metric"], *failures.aggregate["Quantity"],
    }


def export_tables(run_dir, run_name: str, per_question: pd.DataFrame, tables: Mapping[str, pd.DataFrame],
                  vocabulary: Iterable[str], private: Mapping[str, set[str]],
                  mode: str = "pseudonym", summarizer: str | None = None) -> tuple[list[str], pd.DataFrame]:
    """Check, then write ``public/per_question_metrics.csv``, each of ``tables`` and ``public/README.md``.

    A ``question_id`` column of any table is replaced by the public IDs (``mode``: pseudonym or original).
    ``vocabulary`` lists the strings the tables may hold besides numbers (fixed wording, labels); retriever
    names, question types and the public IDs are allowed here; ``private`` (:func:`private_strings`) is what no
    cell may contain.  ``summarizer`` (the study's ``Study.summarizer_note()``: set when the summaries come from
    the offline stand-in) becomes a ``summarizer`` column of every file and a line of the README.  Returns the
    written paths relative to ``run_dir`` and the private ID map (for ``tables/public_question_ids.csv``).
    """
    run_dir = Path(run_dir)
    public_rows, mapping = public_per_question(per_question, mode)
    to_public = dict(zip(mapping["question_id"], mapping["public_id"]))
    everything = {"per_question_metrics": public_rows}
    for name, frame in tables.items():
        if "question_id" in frame.columns:
            frame = frame.assign(question_id=[to_public.get(q) or (pseudonym(q) if mode == "pseudonym" else q)
                                              for q in frame["question_id"]])
        everything[name] = frame
    wording = set(vocabulary) | set(public_rows["retriever"])   # our wording and the study's validated retriever names
    user_values = set(mapping["public_id"]) | set(public_rows["question_type"].astype(str))
    if summarizer is not None:
        everything = {name: frame.assign(summarizer=summarizer) for name, frame in everything.items()}
        wording.add(summarizer)
    check_tables(everything, wording, private, user_values)
    folder = run_dir / PUBLIC_DIR
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, frame in everything.items():
        path = folder / f"{name}.csv"
        frame.to_csv(path, index=False)
        written.append(str(path.relative_to(run_dir)))
    readme = folder / "README.md"
    readme.write_text(_readme(run_name, list(everything), mode, summarizer), encoding="utf-8")
    written.append(str(readme.relative_to(run_dir)))
    return written, mapping


def _readme(run_name: str, names: list[str], mode: str, summarizer: str | None = None) -> str:
    ids = ("pseudonymised (`q_` + 12 hex digits of SHA-1 of the ID; the private map is `../tables/public_question_ids.csv`)"
           if mode == "pseudonym" else "the study's own question IDs")
    lines = [
        f"# Public results of run `{run_name}`",
        "",
        "Aggregates and per-question metrics only (paper §9.2). Not included: message text, question text, chunk",
        "text, sender names, source names, timestamps. Question IDs are " + ids + ".",
        "Every string in these files was checked against the study's sources, senders, question texts and message",
        "texts before writing. This does not formally guarantee that re-identification is impossible.",
        "",
        "Intervals are percentile-bootstrap 95 % CIs over questions, conditional on the configurations selected",
        "on the same questions (selection uncertainty is not included).",
        "",
        *([f"Summaries: {summarizer}; every file says so in its `summarizer` column.", ""] if summarizer else []),
        "| file | |",
        "|---|---|",
    ]
    titles = {"per_question_metrics": "Recall/MRR/nDCG at every cut-off, per retriever and question",
              **{spec.name: spec.title for spec in PUBLIC_TABLES}}
    lines += [f"| `{name}.csv` | {titles.get(name, '')} |" for name in names]
    return "\n".join(lines) + "\n"
