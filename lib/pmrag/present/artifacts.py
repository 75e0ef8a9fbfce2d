"""Every table and figure a study writes, declared once: its file name, the notebook that writes it (its only
writer), a title, and for a table with a fixed layout its columns.

Notebooks save through these declarations (``study.save_table(T.table1_dataset, frame)``), the run README
reads through them, and the public export takes the tables marked ``public``; a test checks that each is
written by exactly its notebook.  Renaming one renames it everywhere; a name that is not declared cannot
be saved.
"""

from __future__ import annotations

import base64
import io
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pmrag.evaluate.metric_names import (GROUP_METRICS, MESSAGE_METRICS, NDCG5, PAPER_COLUMNS, RECALL5, SET_METRICS,
                                        TABLE_METRICS, at_k)

_GROUP_RECALL5, _, _GROUP_NDCG5 = map(str, at_k(5, GROUP_METRICS))
(_MESSAGE_RECALL5,) = map(str, at_k(5, MESSAGE_METRICS))
_LABELS = tuple(m.label for m in TABLE_METRICS)   # Recall@5, MRR@5, nDCG@5

@dataclass(frozen=True)
class TableSpec:
    name: str
    notebook: str
    title: str
    columns: tuple[str, ...] | None = None   # None: columns depend on the data (question types, cut-offs)
    public: bool = False                      # part of outputs/<run>/public/ (aggregates only, §9.2)

    @property
    def file(self) -> str:
        return f"tables/{self.name}.csv"

    @property
    def full_file(self) -> str:
        """The same table at full precision (:func:`write_csv`)."""
        return full_precision_path(self.file).as_posix()


@dataclass(frozen=True)
class FigureSpec:
    name: str
    notebook: str
    title: str

    @property
    def file(self) -> str:
        return f"figures/{self.name}.png"


class Saved(str):
    """A saved file's path in the run folder: a string that a notebook cell does not echo (the table or figure
    itself is what the reader wants to see)."""

    def _ipython_display_(self) -> None:
        pass


SAVE_DPI = 120   # the PNGs in outputs/<run>/figures/
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"   # a notebook kernel's matplotlib backend


def write_figure(run_dir, spec: FigureSpec, fig) -> Saved:
    """Write a declared figure to ``<run_dir>/figures/<name>.png`` (:data:`SAVE_DPI`, no software stamp, so the same
    figure is the same bytes); returns its path in the run folder.  In a notebook kernel the written PNG is also
    the cell's output for the figure (:func:`show_inline`), so the figure is drawn once, not once more by the
    inline backend at the cell's end."""
    target = Path(run_dir) / spec.file
    target.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=SAVE_DPI, metadata={"Software": None})
    target.write_bytes(buffer.getvalue())
    show_inline(fig, buffer.getvalue())
    return Saved(spec.file)


def show_inline(fig, png: bytes) -> bool:
    """Show ``png`` (``fig`` as already drawn, e.g. at :data:`SAVE_DPI`) as the notebook output of ``fig``, and close
    ``fig``, where matplotlib's inline backend would otherwise draw it again when the cell ends (at the figure's
    own dpi, with a tight box: two more drawings of every text, ~0.3 s a figure).  The PNG is shown at the size
    the backend shows the figure, its inches × ``fig.dpi`` CSS pixels, so a figure drawn at a higher dpi reads
    at the same size, only sharper; its plain text is the backend's (``<Figure size 840x952 with 1 Axes>``).
    Anywhere else (a script, an interactive backend, no IPython) nothing is shown or closed: returns False."""
    import matplotlib.pyplot as plt

    if plt.get_backend() != INLINE_BACKEND:
        return False
    from IPython import get_ipython
    from IPython.display import display

    if get_ipython() is None:
        return False
    width, height = (round(float(inches) * fig.dpi) for inches in fig.get_size_inches())
    display({"image/png": base64.b64encode(png).decode("ascii"), "text/plain": repr(fig)}, raw=True,
            metadata={"image/png": {"width": width, "height": height}})
    plt.close(fig)
    return True


# -- the precision of the CSVs a run writes (tables/ and public/), stated once ---------------------------------------
CSV_DECIMALS = 4   # every float: metrics, interval bounds, differences, shares, rates, means, β (0.6531, 1234.5679)
CSV_P_DIGITS = 4   # p-values (a column ``p`` or ``p_…``): significant digits, since they span orders of magnitude
FULL_DIR = "full"  # beside each CSV folder: the same files at full precision (float64 written shortest round-trip)
_P_VALUE = re.compile(r"p(_\w+)?|p[- ]value.*", re.IGNORECASE)


def is_p_value(column) -> bool:
    """Whether a column holds p-values, by name: ``p``, ``p_permutation``, ``p_holm``, ``p-value``."""
    return isinstance(column, str) and bool(_P_VALUE.fullmatch(column))


def csv_rounded(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as its CSV holds it: every float (in a float column, or a float cell of a mixed column) rounded to
    :data:`CSV_DECIMALS` decimals, a p-value column's to :data:`CSV_P_DIGITS` significant digits; integers, booleans,
    text and missing values unchanged.  The full-precision file (:func:`write_csv`) keeps the rest."""
    out = frame.copy()
    for position, column in enumerate(frame.columns):
        values = frame.iloc[:, position]
        p_value = is_p_value(column)
        if pd.api.types.is_float_dtype(values.dtype):
            array = values.to_numpy(dtype=float, na_value=np.nan)   # nullable Float64 too
            rounded = (np.array([_significant(x) for x in array], dtype=float) if p_value
                       else np.round(array, CSV_DECIMALS) + 0.0)          # + 0.0: no "-0.0"
            out.isetitem(position, pd.Series(rounded, index=values.index, name=column))
        elif values.dtype == object:
            one = _significant if p_value else _decimal
            out.isetitem(position, values.map(lambda v: one(v) if isinstance(v, float) else v))
    return out


def _decimal(x: float) -> float:
    return float(np.round(x, CSV_DECIMALS)) + 0.0


def _significant(x: float) -> float:
    return x if not np.isfinite(x) else float(f"{x:.{CSV_P_DIGITS}g}") + 0.0


def full_precision_path(path) -> Path:
    """Where the full-precision twin of a CSV lies: ``tables/x.csv`` → ``tables/full/x.csv``."""
    path = Path(path)
    return path.parent / FULL_DIR / path.name


def write_csv(path, frame: pd.DataFrame) -> Path:
    """Write ``frame`` to ``path`` rounded (:func:`csv_rounded`: what a reader opens) and to
    :func:`full_precision_path` unrounded (what an audit recomputes from, and what the run README reads, so that a
    number it prints is rounded once); returns ``path``."""
    path = Path(path)
    full = full_precision_path(path)
    full.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(full, index=False)
    csv_rounded(frame).to_csv(path, index=False)
    return path


CI = ("mean", "ci_low", "ci_high")
ITEM_VALUE = ("Item", "Value")
DIFFERENCE = ("comparison", "method_a", "method_b", "metric", "delta", "ci_low", "ci_high", "excludes_zero",
              "interpretation")
EXTRACTOR = "extractor"                   # the memory graph's extractor label (pmrag.present.graph)
ANSWERER = "answerer"                     # who answered (pmrag.evaluate.answers.answerer_label; a stand-in says so)


class T:
    """The tables, by name."""

    # 01_chunking
    ingest_report = TableSpec("ingest_report", "01_chunking",
                              "Ingest reconciliation per input file: read = stored + already present + rejected")
    table1_dataset = TableSpec("table1_dataset", "01_chunking", "Table 1 — dataset statistics", ITEM_VALUE)
    chunking_sessions_windows = TableSpec("chunking_sessions_windows", "01_chunking", "Sessions and windows", ITEM_VALUE)
    session_sizes = TableSpec("session_sizes", "01_chunking", "Messages per session",
                              ("messages per session", "sessions"))
    raw_text_lengths = TableSpec("raw_text_lengths", "01_chunking", "raw_text length (§3.3)",
                                 ("statistic", "this dataset", "paper"))
    message_inventory = TableSpec("message_inventory", "01_chunking", "What the messages contain", ("Item", "Messages"))
    messages_in_no_chunk = TableSpec("messages_in_no_chunk", "01_chunking", "Messages in no chunk, per source",
                                     ("source", "messages", "in_no_chunk", "share_in_no_chunk"))
    questions_dropped = TableSpec("questions_dropped", "01_chunking", "Questions read, evaluated and dropped, by reason",
                                  ("stage", "reason", "questions"))
    # 02_representations
    representation_lengths = TableSpec("representation_lengths", "02_representations", "Length per representation",
                                       ("representation", "mean", "p95", "max", "> 4,000", "> 7,000"))
    summary_provenance = TableSpec("summary_provenance", "02_representations", "Summary provenance")
    vectors = TableSpec("vectors", "02_representations", "Vectors per representation",
                        ("representation", "model", "rows", "dim", "dtype", "sent_chars_mean", "sent_chars_max",
                         "shortened"))
    # 03_retrievers
    per_question_metrics = TableSpec("per_question_metrics", "03_retrievers",
                                     "Per-question metrics of every single retriever")
    single_retriever_cis = TableSpec("single_retriever_cis", "03_retrievers", "Single retrievers: 95 % intervals",
                                     ("retriever", "metric", *CI))
    table3_single_retrievers = TableSpec("table3_single_retrievers", "03_retrievers",
                                         "Table 3 — single retriever performance",
                                         ("Method", *_LABELS))
    representation_by_retriever = TableSpec("representation_by_retriever", "03_retrievers",
                                            "Representation × retriever")
    single_retriever_recall_by_type = TableSpec("single_retriever_recall_by_type", "03_retrievers",
                                                "Single retrievers: Recall@5 by question type")
    evidence_visibility = TableSpec("evidence_visibility", "03_retrievers",
                                    "Primary evidence each retriever sees: shown, partly shown, hidden")
    evidence_visibility_reasons = TableSpec("evidence_visibility_reasons", "03_retrievers",
                                            "Why primary evidence is not shown, per retriever",
                                            ("retriever", "status", "reason", "evidence_messages"))
    recall_by_evidence_visibility = TableSpec("recall_by_evidence_visibility", "03_retrievers",
                                              "Recall@5 where the retriever sees all the primary evidence vs the rest")
    matching_candidates = TableSpec("matching_candidates", "03_retrievers",
                                    "Chunks scoring above 0 per question (lexical overlap), beside Recall@5",
                                    ("retriever", "questions", "min", "p10", "median", "p90", "max",
                                     "questions under depth", RECALL5.label))
    # 04_hybrid_sweep
    hybrid_sweep = TableSpec("hybrid_sweep", "04_hybrid_sweep",
                             "Hybrid sweep: macro metrics of every fusion × pairing × β (minmax: the paper's)",
                             ("fusion", "bm25", "vector", "beta", *PAPER_COLUMNS))
    hybrid_sweep_per_question = TableSpec("hybrid_sweep_per_question", "04_hybrid_sweep",
                                          "Hybrid sweep: per-question metrics",
                                          ("fusion", "bm25", "vector", "beta", "question_id", *PAPER_COLUMNS))
    hybrid_per_question_metrics = TableSpec("hybrid_per_question_metrics", "04_hybrid_sweep",
                                            "Per-question metrics of each pairing's selected β")
    table4_hybrids = TableSpec("table4_hybrids", "04_hybrid_sweep", "Table 4 — selected β per pairing",
                               ("BM25", "Vector", "β", *_LABELS))
    zero_minimum = TableSpec("zero_minimum", "04_hybrid_sweep",
                             "Lists whose min-max minimum is a zero score (padded BM25 lists)",
                             ("retriever", "questions", "lists with a zero minimum", "share"))
    candidate_ceilings = TableSpec("candidate_ceilings", "04_hybrid_sweep", "Candidate ceilings (§5.3)")
    # 05_bootstrap
    bootstrap_cis = TableSpec("bootstrap_cis", "05_bootstrap", "95 % intervals of every method",
                              ("retriever", "metric", *CI), public=True)
    table5_differences = TableSpec("table5_differences", "05_bootstrap", "Table 5 — paired differences (values)",
                                   ("comparison", "method_a", "method_b", "metric", "delta", "ci_low", "ci_high",
                                    "excludes_zero", "interpretation"), public=True)
    table5 = TableSpec("table5", "05_bootstrap", "Table 5 — paired differences in Recall@5",
                       ("Comparison", "ΔRecall@5", "95% CI", "Interpretation"))
    recall_by_type_cis = TableSpec("recall_by_type_cis", "05_bootstrap", "Recall@5 by question type, every method",
                                   ("retriever", "question_type", "questions", *CI), public=True)
    table6_best_hybrid_by_type = TableSpec("table6_best_hybrid_by_type", "05_bootstrap",
                                           "Table 6 — the selected best hybrid by question type",
                                           ("Question type", "Questions", RECALL5.label, "95% CI"), public=True)
    # 06_failure_analysis
    table7_top5_failures = TableSpec("table7_top5_failures", "06_failure_analysis",
                                     "Table 7 — Top-K failures of the selected best hybrid", public=True)
    failure_labels = TableSpec("failure_labels", "06_failure_analysis", "Rule-based label of each failure",
                               ("question_id", "question_type", "n_primary", "label"), public=True)
    table8_failure_labels = TableSpec("table8_failure_labels", "06_failure_analysis", "Table 8 — rule-based labels",
                                      ("Failure type", "Count", "Percentage"), public=True)
    aggregate_detail = TableSpec("aggregate_detail", "06_failure_analysis", "Aggregate questions (§7.3)",
                                 ("Quantity", "Value"), public=True)
    topk_sensitivity = TableSpec("topk_sensitivity", "06_failure_analysis", "Figure 6's data: Top-K success by type",
                                 ("question_type", "k", "questions", "success_rate", "recall"), public=True)
    table9_success_overlap = TableSpec("table9_success_overlap", "06_failure_analysis",
                                       "Table 9 — success overlap of the selected pair",
                                       ("Success pattern", "Questions"), public=True)
    table9_by_tag = TableSpec("table9_by_tag", "06_failure_analysis",
                              "Table 9 within each value of each question tag (the questions file's `tags`)",
                              ("tag", "value", "questions", "BM25 only", "Vector only", "Both", "Neither"))
    public_question_ids = TableSpec("public_question_ids", "06_failure_analysis",
                                    "Private map from question IDs to their public pseudonyms",
                                    ("question_id", "public_id"))

    # 07_memory_graph (TOBUGraph, paper 002): every table names the graph's extractor (a stand-in says so); not
    # public: interest labels are chat words, and public.py exports only the LINE paper's aggregates so far
    graph_provenance = TableSpec("graph_provenance", "07_memory_graph",
                                 "The graph's extractor and interest relevance, with their settings",
                                 ("stage", "key", "value"))
    graph_nodes_edges = TableSpec("graph_nodes_edges", "07_memory_graph", "Memory graph: nodes and edges by kind",
                                  ("element", "kind", "subkind", "count", EXTRACTOR))
    graph_interest_degrees = TableSpec("graph_interest_degrees", "07_memory_graph",
                                       "Memory graph: interest degree distribution", ("memories", "interests", EXTRACTOR))
    graph_memories_per_interest = TableSpec("graph_memories_per_interest", "07_memory_graph",
                                            "Memory graph: the most shared interests (labels only where chat text is shown)",
                                            ("interest", "subkind", "memories", EXTRACTOR))
    graph_split = TableSpec("graph_split", "07_memory_graph", "Questions in the tuning and held-out parts, by type",
                            ("question_type", "tuning", "held_out", EXTRACTOR))
    graph_tuning = TableSpec("graph_tuning", "07_memory_graph",
                             "Tuning part: TOBUGraph's threshold × cap and each RAG baseline's k (macro set metrics)",
                             ("method", "threshold", "cap", "k", *SET_METRICS, "mean_retrieved", "empty_sets",
                              "chosen", "edge", EXTRACTOR))
    graph_set_cis = TableSpec("graph_set_cis", "07_memory_graph",
                              "TOBUGraph and RAG baselines: set metrics with 95 % intervals (held-out)",
                              ("retriever", "metric", *CI, EXTRACTOR))
    graph_set_pooled = TableSpec("graph_set_pooled", "07_memory_graph", "Set metrics pooled over questions (held-out)",
                                 ("retriever", "questions", "micro_precision", "micro_recall", "micro_f1",
                                  "mean_retrieved", "empty_sets", EXTRACTOR))
    table2_graph_sets = TableSpec("table2_graph_sets", "07_memory_graph",
                                  "Table 2 (paper 002) layout — set precision, recall, F1 (held-out)",
                                  ("Metric", "TOBUGraph", "RAGv1", "RAGv2", "RAGv3", EXTRACTOR))
    graph_set_differences = TableSpec("graph_set_differences", "07_memory_graph",
                                      "TOBUGraph − each RAG baseline in set F1 (paired, held-out)", (*DIFFERENCE, EXTRACTOR))
    graph_set_by_type = TableSpec("graph_set_by_type", "07_memory_graph",
                                  "Set F1 and set recall by question type (held-out)",
                                  ("retriever", "metric", "question_type", "questions", *CI, EXTRACTOR))
    graph_rank_cis = TableSpec("graph_rank_cis", "07_memory_graph",
                               "Graph, graph + flat hybrid and flat retrievers: Recall/MRR/nDCG@5 (held-out)",
                               ("retriever", "metric", *CI, EXTRACTOR))
    graph_rank_differences = TableSpec("graph_rank_differences", "07_memory_graph",
                                       "Graph methods − the best flat retriever in Recall@5 (paired, held-out)",
                                       (*DIFFERENCE, EXTRACTOR))
    graph_recall_by_type = TableSpec("graph_recall_by_type", "07_memory_graph", "Recall@5 by question type (held-out)",
                                     ("retriever", "question_type", "questions", *CI, EXTRACTOR))
    graph_aggregate_differences = TableSpec("graph_aggregate_differences", "07_memory_graph",
                                            "Paired differences within the aggregate question type (held-out)",
                                            (*DIFFERENCE, EXTRACTOR))

    # 08_beyond_retrieval (§7.2, §8, §9.1): each family against the paper's best flat retriever and best hybrid by type
    beyond_lexical = TableSpec("beyond_lexical", "08_beyond_retrieval",
                               "Lexical methods (Sudachi, character n-gram BM25, RM3) by question type, with paired "
                               "differences against the paper's best flat retriever and best hybrid")
    beyond_lexical_own = TableSpec("beyond_lexical_own", "08_beyond_retrieval",
                                   "Lexical methods − the regex BM25 of the same representation (paired, by type)",
                                   ("question_type", *DIFFERENCE))
    beyond_lexical_matches = TableSpec("beyond_lexical_matches", "08_beyond_retrieval",
                                       "Chunks scoring above 0 per question, by lexical retriever",
                                       ("retriever", "median", "p10", "p90", "questions with none"))
    beyond_dense = TableSpec("beyond_dense", "08_beyond_retrieval",
                             "Multi-vector retrievers by question type, with paired differences against the paper's "
                             "best flat retriever and best hybrid")
    beyond_dense_own = TableSpec("beyond_dense_own", "08_beyond_retrieval",
                                 "Multi-vector − the single-vector retriever of the same representation (paired, by type)",
                                 ("question_type", *DIFFERENCE))
    beyond_distributed = TableSpec("beyond_distributed", "08_beyond_retrieval",
                                   "MMR, session expansion and query decomposition by question type (aggregate first), "
                                   "with paired differences against the paper's best flat retriever and best hybrid")
    beyond_distributed_own = TableSpec("beyond_distributed_own", "08_beyond_retrieval",
                                       "Distributed-evidence methods − their base retriever (paired, by type)",
                                       ("question_type", *DIFFERENCE))
    beyond_fusion_best = TableSpec("beyond_fusion_best", "08_beyond_retrieval",
                                   "Each fusion's selected β per pairing (the paper's rule), macro metrics",
                                   ("fusion", "bm25", "vector", "beta", *PAPER_COLUMNS))
    beyond_fusion = TableSpec("beyond_fusion", "08_beyond_retrieval",
                              "Each fusion's best hybrid by question type, with paired differences against the "
                              "paper's best flat retriever and best hybrid")
    beyond_ablation = TableSpec("beyond_ablation", "08_beyond_retrieval",
                                "embedding_text's parts under BM25 and dense by question type, with paired differences "
                                "against the paper's best flat retriever and best hybrid")
    beyond_ablation_own = TableSpec("beyond_ablation_own", "08_beyond_retrieval",
                                    "embedding_text's parts − embedding_text under the same method (paired, by type)",
                                    ("question_type", *DIFFERENCE))

    # 09_selection_and_power (§8.1, §9.1): selection-aware numbers beside the paper's conditional ones
    selection_summary = TableSpec("selection_summary", "09_selection_and_power",
                                  "The selected hybrid in sample (conditional), bias-corrected, out of fold and with "
                                  "the selection in the bootstrap (out of bag: a conservative bound)",
                                  ("procedure", "metric", "in_sample", "conditional_low", "conditional_high",
                                   "optimism", "bias_corrected", "bias_corrected_low", "bias_corrected_high",
                                   "out_of_fold", "out_of_fold_min", "out_of_fold_max", "out_of_fold_sd",
                                   "winners_curse", "bootstrap_kind", "bootstrap_estimate", "bootstrap_low",
                                   "bootstrap_high"))
    selection_coverage = TableSpec("selection_coverage", "09_selection_and_power",
                                   "How often the selected hybrid's intervals cover its true value in studies drawn "
                                   "from this one",
                                   ("metric", "interval", "coverage", "mc_se", "mean_width", "mean_error", "datasets"))
    selection_chosen = TableSpec("selection_chosen", "09_selection_and_power",
                                 "How often each configuration was chosen on the training folds",
                                 ("fusion", "bm25", "vector", "beta", "times", "share"))
    evidence_groups = TableSpec("evidence_groups", "09_selection_and_power",
                                "Recall@5 of every method by chunk (each gold window), by evidence group and by "
                                "message (each primary-evidence message once), with nDCG@5 by chunk and by group",
                                ("retriever", str(RECALL5), str(NDCG5), _GROUP_RECALL5, _GROUP_NDCG5,
                                 f"Δ {RECALL5}", "gold chunks", "groups", _MESSAGE_RECALL5, f"Δ {_MESSAGE_RECALL5}",
                                 "evidence messages", "in no chunk"))
    comparisons_adjusted = TableSpec("comparisons_adjusted", "09_selection_and_power",
                                     "The declared comparisons and every other method − the selected hybrid: percentile "
                                     "CI, permutation test, Holm and BH within each family, detectable difference",
                                     ("family", "method", "reference", "aliases", "metric", "delta", "ci_low", "ci_high",
                                      "ci_excludes_zero", "p_permutation", "p_holm", "reject_holm", "p_bh", "reject_bh",
                                      "selected_in_sample", "same_differences_as", "detectable_difference",
                                      "significance_threshold", "alpha", "power"))
    power_curve = TableSpec("power_curve", "09_selection_and_power",
                            "Smallest true paired difference in Recall@5 detected with the set power, by question count",
                            ("n_questions", "detectable_difference"))


    # 10_incomplete_gold (§8): pools judged by the complete gold (the demo's) against the complete gold itself
    pool_depth_gold_coverage = TableSpec(
        "pool_depth_gold_coverage", "10_incomplete_gold",
        "Pool depth: pool size, share of the complete gold pooled, Recall@5 / nDCG@5 with the pool's judgments "
        "(unjudged = 0) and with the complete gold (on the questions the pool keeps, and on all), Kendall's τ "
        "between the two rankings of methods",
        ("depth", "pool_mean", "pool_total", "gold_share", "primary_share", "questions", "retriever", "pooled",
         "recall@5 pool", "recall@5 complete kept", "recall@5 complete", "ndcg@5 pool", "ndcg@5 complete kept",
         "ndcg@5 complete", "tau recall@5", "tau ndcg@5"))
    judged_at_k = TableSpec(
        "judged_at_k", "10_incomplete_gold",
        "judged@5, the paper's metrics (unjudged = 0), condensed-list Recall@5 / nDCG@5 and bpref per pool depth, "
        "beside the complete gold's",
        ("depth", "questions", "retriever", "pooled", "recall@5", "ndcg@5", "judged@5", "condensed_recall@5",
         "condensed_ndcg@5", "bpref", "recall@5 complete", "ndcg@5 complete", "bpref complete"))
    incomplete_measure_tau = TableSpec(
        "incomplete_measure_tau", "10_incomplete_gold",
        "Kendall's τ between each measure's ranking of methods with a pool's judgments and with the complete gold",
        ("depth", "measure", "against", "tau all", "tau pooled"))
    leave_one_out_pool_bias = TableSpec(
        "leave_one_out_pool_bias", "10_incomplete_gold",
        "Leave one retriever out of the pool: its Recall@5 / nDCG@5 and rank on a pool it did not contribute to",
        ("retriever", "pooled", "pool", "questions", "questions with it", "recall@5 complete", "recall@5 with it",
         "recall@5 left out", "ndcg@5 complete", "ndcg@5 left out", "rank complete", "rank left out", "Δ recall@5",
         "Δ ndcg@5", "rank change"))


    # 11_make_gold (§4.2–4.3): the walkthrough of making gold for a history (its annotation store, not the study's)
    gold_pool_sizes = TableSpec("gold_pool_sizes", "11_make_gold",
                                "The walkthrough's pool: chunks to grade per question, brought by a retriever or a hint",
                                ("question_id", "chunks", "by_retriever", "by_hint"))
    gold_agreement = TableSpec("gold_agreement", "11_make_gold",
                               "Agreement of the annotators of the walkthrough's pool (weighted κ, ordinal α, raw), "
                               "with bootstrap intervals over questions",
                               ("measure", "annotators", "type", "n_questions", "n_rows", "value", "ci_low", "ci_high"))

    # 12_answers (002 §2.4's h(q, M′, S′), 000 §9's evidence-attributed answers): every table names the answerer
    answers_cis = TableSpec("answers_cis", "12_answers",
                            "Answers from each retriever's output: LoCoMo accuracy, cited-set and citation scores, and "
                            "the context's set scores, with 95 % intervals (held-out)",
                            ("retriever", "metric", *CI, ANSWERER))
    answers_by_type = TableSpec("answers_by_type", "12_answers", "Answers by question type (held-out)",
                                ("retriever", "question_type", "metric", "questions", *CI, ANSWERER))
    answers_differences = TableSpec("answers_differences", "12_answers",
                                    "The first retriever's answers − each other's (paired, held-out)",
                                    (*DIFFERENCE, ANSWERER))
    answers_counts = TableSpec("answers_counts", "12_answers",
                               "Answers per retriever: questions, failed calls, context and citations, refused ids",
                               ("retriever", "questions", "failed", "mean_context", "mean_cited", "refused", ANSWERER))


class F:
    """The figures, by name."""

    chunk_lengths = FigureSpec("chunk_lengths", "01_chunking", "raw_text length and messages per chunk")
    representation_lengths = FigureSpec("representation_lengths", "02_representations", "Length per representation")
    figure1_single_retriever_recall = FigureSpec("figure1_single_retriever_recall", "03_retrievers",
                                                 "Figure 1 — single-retriever Recall@5 with 95 % CIs")
    figure2_hybrid_recall = FigureSpec("figure2_hybrid_recall", "04_hybrid_sweep", "Figure 2 — hybrid Recall@5 vs β")
    figure3_hybrid_ndcg = FigureSpec("figure3_hybrid_ndcg", "04_hybrid_sweep", "Figure 3 — hybrid nDCG@5 vs β")
    figure4_differences = FigureSpec("figure4_differences", "05_bootstrap", "Figure 4 — paired differences")
    figure5_best_hybrid_by_type = FigureSpec("figure5_best_hybrid_by_type", "05_bootstrap",
                                             "Figure 5 — the best hybrid by question type")
    figure6_topk_sensitivity = FigureSpec("figure6_topk_sensitivity", "06_failure_analysis",
                                          "Figure 6 — Top-K sensitivity by question type")
    figure_interest_degrees = FigureSpec("figure_interest_degrees", "07_memory_graph",
                                         "Memory graph: interest degree distribution")
    figure_graph_by_type = FigureSpec("figure_graph_by_type", "07_memory_graph",
                                      "TOBUGraph by question type: Recall@5 and set recall with 95 % CIs (held-out)")
    figure_beyond_lexical = FigureSpec("figure_beyond_lexical", "08_beyond_retrieval",
                                       "Lexical methods − the paper's best flat retriever, by type")
    figure_beyond_dense = FigureSpec("figure_beyond_dense", "08_beyond_retrieval",
                                     "Multi-vector methods − the paper's best flat retriever, by type")
    figure_beyond_distributed = FigureSpec("figure_beyond_distributed", "08_beyond_retrieval",
                                           "Distributed-evidence methods − the paper's best flat retriever, by type")
    figure_beyond_fusion = FigureSpec("figure_beyond_fusion", "08_beyond_retrieval",
                                      "Each fusion's best hybrid − the paper's best hybrid, by type")
    figure_beyond_ablation = FigureSpec("figure_beyond_ablation", "08_beyond_retrieval",
                                        "embedding_text's parts − the paper's best flat retriever, by type")
    figure_selection = FigureSpec("figure_selection", "09_selection_and_power",
                                  "The selected hybrid: conditional, bias-corrected, out-of-fold and out-of-bag "
                                  "Recall@5")
    figure_power = FigureSpec("figure_power", "09_selection_and_power",
                              "Detectable difference in Recall@5 against the number of questions")
    figure_graph_subgraph = FigureSpec("figure_graph_subgraph", "07_memory_graph",
                                       "The subgraph one question reaches: chosen interests → memories")


TABLES: dict[str, TableSpec] = {v.name: v for v in vars(T).values() if isinstance(v, TableSpec)}
FIGURES: dict[str, FigureSpec] = {v.name: v for v in vars(F).values() if isinstance(v, FigureSpec)}
PUBLIC_TABLES: tuple[TableSpec, ...] = tuple(t for t in TABLES.values() if t.public)


def check_columns(spec: TableSpec, columns) -> None:
    """A ``ValueError`` naming the table when a fixed-layout table is saved with other columns."""
    if spec.columns is not None and tuple(map(str, columns)) != spec.columns:
        raise ValueError(f"table {spec.name} must have columns {list(spec.columns)}, got {list(map(str, columns))}")


def produced_by(notebook: str) -> list[str]:
    """The run-folder files (tables, then figures) the notebook named ``notebook`` (its stem) writes."""
    return [spec.file for spec in [*TABLES.values(), *FIGURES.values()] if spec.notebook == notebook]
