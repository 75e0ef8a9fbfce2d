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
formatted number, none may look like a date or time (any plausible calendar date, in any of the forms
:mod:`pmrag.present.dates` lists), and none may contain a source name, a sender, a question text or a message
text of the study, whatever its case, width or kana script (:mod:`pmrag.present.private_text`); otherwise it
raises :class:`PublicExportError` naming the file, the column, the row and the check that refused, never the
value, and writes nothing.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from pmrag.core.errors import PmragError
from pmrag.core.text import clip
from pmrag.present.artifacts import CSV_DECIMALS, CSV_P_DIGITS, FULL_DIR, PUBLIC_TABLES, T, write_csv
from pmrag.present.dates import looks_like_date
from pmrag.present.private_text import NAME_KINDS, PrivateIndex

PUBLIC_DIR = "public"
MIN_CHECKED_TEXT = 4  # shorter message texts ("笑", "ok") are too common to test for meaningfully
_WORDS = re.compile(r"[0-9A-Za-z]+")


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
    return _private_strings(*(_distinct(messages[name]) for name in ("source", "sender", "text")), chunks, questions)


def stored_private_strings(engine, chunks: pd.DataFrame, questions: pd.DataFrame) -> dict[str, set[str]]:
    """:func:`private_strings` of the messages in the store ``engine``: each column's distinct values, not the
    messages (:func:`~pmrag.core.store.distinct_values`; 3.6 million messages read as a frame took 19.5 s)."""
    from pmrag.core.store import distinct_values, messages

    return _private_strings(distinct_values(engine, messages.c.source), distinct_values(engine, messages.c.sender),
                            distinct_values(engine, messages.c.text, many=True), chunks, questions)


def _distinct(column: pd.Series) -> set[str]:
    return set(column.astype(str).unique().tolist())


def _private_strings(sources: set, senders: set, texts: set, chunks: pd.DataFrame,
                     questions: pd.DataFrame) -> dict[str, set[str]]:
    texts = {str(t) for t in texts}
    return {
        "source name": {str(s) for s in sources} | _distinct(chunks["source"]),
        "sender": {str(s) for s in senders} - {"SYSTEM"},
        "question text": _distinct(questions["text"]),
        "message text": {t for t in texts if len(t.strip()) >= MIN_CHECKED_TEXT},
    }


class PublicCheck:
    """The checks every string bound for ``public/`` passes, in order; :meth:`refusal` names the one that fails.

    * vocabulary (table cells only): the export's own wording, a user value or a formatted number;
    * date: no date or time in any form (:func:`~pmrag.present.dates.looks_like_date`);
    * name: no source name or sender in any form (:mod:`pmrag.present.private_text`);
    * text: no question text or message text of the study.

    ``vocabulary`` is the export's own wording (labels, comparisons, retriever names); ``user_values``
    (question types, public IDs) may appear too but come from the user's data.  Every string is checked, the
    wording included, so nothing is laundered by being listed; words of the wording are the only "common
    words" a one-word message may match harmlessly (:class:`~pmrag.present.private_text.PrivateIndex`).
    ``pseudonyms`` are the public IDs this export computed: SHA-1 digits carry nothing of the ID, and
    checking them would refuse at random (a sender called ``e`` is a word of ``q_1e2...``, a digest may hold
    ``20240410``), so they skip the date, name and text checks.
    """

    def __init__(self, vocabulary: Iterable[str], private: Mapping[str, set[str]], user_values: Iterable[str] = (),
                 pseudonyms: Iterable[str] = ()):
        vocabulary = set(vocabulary)
        self.index = PrivateIndex(private, {word for value in vocabulary for word in _WORDS.findall(value)})
        self.allowed = vocabulary | set(user_values)
        self.pseudonyms = frozenset(pseudonyms)

    def refusal(self, value: str, in_cell: bool = True) -> str | None:
        """Which check refuses ``value`` and why, without quoting it; ``None`` when it may be public."""
        if value in self.pseudonyms:
            return None
        if in_cell and value not in self.allowed and not _is_number_text(value):
            return "the vocabulary check refused a value outside the export's vocabulary"
        if looks_like_date(value):
            return "the date check refused a value that looks like a date or time"
        kind = self.index.find(value)
        if kind:
            check = "name" if kind in NAME_KINDS else "text"
            return f"the {check} check refused a value containing a {kind} of the study"
        return None

    def tables(self, tables: Mapping[str, pd.DataFrame]) -> None:
        """Raise :class:`PublicExportError` for the first refused column name or cell (string cells, and every
        cell of a question ID or type column); each distinct string is checked once.  The error names the file,
        the column and the row, never the value."""
        checked: set[tuple[str, bool]] = set()
        for name, frame in tables.items():
            for column in frame.columns:
                user_column = _is_user_column(column)
                cells = [(None, str(column))] + [(row, str(v)) for row, v in enumerate(frame[column].tolist())
                                                 if isinstance(v, str) or (user_column and not _is_missing(v))]
                for row, value in cells:
                    if (value, row is None) in checked:
                        continue
                    checked.add((value, row is None))
                    refused = self.refusal(value, in_cell=row is not None)
                    if refused:
                        where = "a column name" if row is None else f"column {clip(column, 40)!r}, row {row}"
                        raise PublicExportError(f"{PUBLIC_DIR}/{name}.csv, {where}: {refused}; nothing written")


def check_tables(tables: Mapping[str, pd.DataFrame], vocabulary: set[str], private: Mapping[str, set[str]],
                 user_values: Iterable[str] = (), pseudonyms: Iterable[str] = ()) -> None:
    """Raise :class:`PublicExportError` for a string cell (or column name) that is outside the export's
    wording and not a formatted number, that holds a date or time, or that contains a private string in any
    form (:class:`PublicCheck`)."""
    PublicCheck(vocabulary, private, user_values, pseudonyms).tables(tables)


def _is_user_column(column) -> bool:
    """A column of question IDs or types, however spelled (``question_id``, ``Question type``, ``questionId``)."""
    return _column_key(column) in ("questionid", "questiontype")


def _is_question_id_column(column) -> bool:
    return _column_key(column) == "questionid"


def _column_key(column) -> str:
    return re.sub(r"[\W_]", "", str(column)).casefold()


def _is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and value != value)


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
                  mode: str = "pseudonym", summarizer: str | None = None,
                  embedder: str | None = None) -> tuple[list[str], pd.DataFrame]:
    """Check, then write ``public/per_question_metrics.csv``, each of ``tables`` and ``public/README.md``.

    Every question ID column of any table (``question_id``, however spelled) is replaced by the public IDs
    (``mode``: pseudonym or original; with ``original`` the IDs are checked like any user value, so one
    carrying a name or a date is refused).  ``vocabulary`` lists the strings the tables may hold besides
    numbers (fixed wording, labels); retriever names, question types and the public IDs are allowed here;
    ``private`` (:func:`private_strings`) is what no cell may contain, in any form (:class:`PublicCheck`); the
    run name, quoted by the README, is checked too.  ``summarizer`` (the study's ``Study.summarizer_note()``:
    set when the summaries come from the offline stand-in) becomes a ``summarizer`` column of every file and a
    line of the README, and ``embedder`` (``Study.embedder_note()``: set when the vectors come from the hashed
    stand-in) an ``embedder`` column and a line, as the study's own tables say it.  Each CSV is written rounded
    and at full precision under ``public/full/`` (:func:`pmrag.present.artifacts.write_csv`).  Returns the written
    paths relative to ``run_dir`` (the rounded CSVs and the README) and the private ID map (for
    ``tables/public_question_ids.csv``).
    """
    run_dir = Path(run_dir)
    public_rows, mapping = public_per_question(per_question, mode)
    to_public = dict(zip(mapping["question_id"], mapping["public_id"]))
    everything = {"per_question_metrics": public_rows}
    for name, frame in tables.items():
        ids = [c for c in frame.columns if _is_question_id_column(c)]
        everything[name] = frame.assign(**{str(c): [to_public.get(q) or (pseudonym(q) if mode == "pseudonym" else q)
                                                    for q in frame[c]] for c in ids})
    wording = set(vocabulary) | set(public_rows["retriever"])   # our wording and the study's validated retriever names
    public_ids = {q for frame in everything.values()
                  for column in frame.columns if _is_question_id_column(column) for q in frame[column]}
    user_values = public_ids | set(public_rows["question_type"].astype(str))
    notes = {column: note for column, note in (("summarizer", summarizer), ("embedder", embedder)) if note is not None}
    everything = {name: frame.assign(**notes) for name, frame in everything.items()}
    wording |= set(notes.values())
    check = PublicCheck(wording, private, user_values, public_ids if mode == "pseudonym" else ())
    check.tables(everything)
    refused = check.refusal(str(run_name), in_cell=False)
    if refused:
        raise PublicExportError(f"{PUBLIC_DIR}/README.md, the run name: {refused}; nothing written")
    folder = run_dir / PUBLIC_DIR
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, frame in everything.items():
        path = write_csv(folder / f"{name}.csv", frame)
        written.append(str(path.relative_to(run_dir)))
    readme = folder / "README.md"
    readme.write_text(_readme(run_name, list(everything), mode, summarizer, embedder), encoding="utf-8")
    written.append(str(readme.relative_to(run_dir)))
    return written, mapping


def _readme(run_name: str, names: list[str], mode: str, summarizer: str | None = None,
            embedder: str | None = None) -> str:
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
        f"Numbers are rounded to {CSV_DECIMALS} decimals (p-values to {CSV_P_DIGITS} significant digits); `{FULL_DIR}/`",
        "holds the same files at full precision.",
        "",
        *([f"Summaries: {summarizer}; every file says so in its `summarizer` column.", ""] if summarizer else []),
        *([f"Vectors: {embedder}; every file says so in its `embedder` column.", ""] if embedder else []),
        "| file | |",
        "|---|---|",
    ]
    titles = {"per_question_metrics": "Recall/MRR/nDCG at every cut-off, per retriever and question",
              **{spec.name: spec.title for spec in PUBLIC_TABLES}}
    lines += [f"| `{name}.csv` | {titles.get(name, '')} |" for name in names]
    return "\n".join(lines) + "\n"
