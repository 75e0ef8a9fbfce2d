"""TOBUGraph against its RAG baselines (paper 002 Table 1–2) and the LINE paper's retrievers, with the graph's
free choices made on one part of the questions and every figure reported on the other.

* **Split** (:func:`tuning_split`): within each question type, the questions in ID order are shuffled by
  ``numpy.random.default_rng(seed)`` and the first ``round(fraction · n)`` (Python's round: half to even) go
  to the tuning part (at least one and at most n − 1 when the type has two or more questions; a type with one
  question is held out).  When no type has two questions (a handful of questions, each of its own type), the
  same rule runs over all the questions as one group; a single question cannot be split (``ValueError``).
* **Tuning** (:func:`tune_interest_choice`): every (threshold, cap) of the grids chooses interests for the
  tuning questions, the caps with "no cap" (the graph's number of interests) added; the one with the highest
  macro set F1 against primary gold wins (ties: higher macro set recall, then the higher threshold, then the
  smaller cap: the fewer interests).  A choice on the grid's edge is reported as such (column ``edge``,
  :func:`grid_edges`): the lowest threshold tried, the highest, the smallest cap, no cap.
* **RAG baselines** (002 Table 1, rebuilt on the study's memories, each top-k by embedding cosine):
  RAGv1 = fixed-size overlapping pieces of each memory's summary (:func:`summary_pieces`), a memory ranked by
  its best piece, so it returns k memories as the others do (:func:`top_memories_by_pieces`); RAGv2 = one
  summary per memory; RAGv3 = the raw conversation per memory.  Each baseline's k is chosen on the tuning part
  from ``baseline_k_grid`` by the graph's criterion (:func:`tune_k`: macro set F1, then set recall, then the
  smaller k), so the graph and its baselines stand on equal footing.
* **Best flat retriever**: the single retriever (not a graph one) with the highest macro Recall@5 on the
  tuning part (ties: nDCG@5, MRR@5, name); the graph + best-flat hybrid's β is chosen on the tuning part by
  the paper's rule (:func:`pmrag.evaluate.sweep.select_best`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from pmrag.core.names import HybridId, RetrieverId, parse_method
from pmrag.core.params import BootstrapSection, GraphSection
from pmrag.evaluate.metric_names import PAPER_METRICS, RECALL5, SET_F1, SET_RECALL
from pmrag.evaluate.runs import PRIMARY, Qrels
from pmrag.evaluate.select import by_name, larger_first, select
from pmrag.evaluate.set_metrics import gold_sizes, macro_set_scores, per_question_set_rows, top_k_counts

TUNING, HELD_OUT = "tuning", "held_out"
SET_METHODS = ("TOBUGraph", "RAGv1", "RAGv2", "RAGv3")
"""The set methods of 002 Table 2, TOBUGraph first (the one the others are compared with)."""
TUNING_METRICS = (SET_F1, SET_RECALL)
"""The tuning grid's selection order (then the larger threshold, the smaller cap)."""


def tuning_split(questions: pd.DataFrame, fraction: float, seed: int) -> pd.Series:
    """``question_id`` → ``"tuning"`` or ``"held_out"`` (module docstring), in question ID order."""
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction!r}")
    if len(questions) < 2:
        raise ValueError(f"{len(questions)} question(s) cannot be split into a tuning and a held-out part")
    ordered = questions.sort_values("question_id")
    groups = [group["question_id"].tolist() for _, group in ordered.groupby("type", sort=True)]
    if all(len(ids) < 2 for ids in groups):
        groups = [ordered["question_id"].tolist()]
    rng = np.random.default_rng(seed)
    part = {}
    for ids in groups:
        shuffled = [ids[i] for i in rng.permutation(len(ids))]
        n_tuning = min(max(round(fraction * len(ids)), 1), len(ids) - 1) if len(ids) >= 2 else 0
        part.update({q: TUNING if i < n_tuning else HELD_OUT for i, q in enumerate(shuffled)})
    return pd.Series(part, name="part").rename_axis("question_id").sort_index()


def interest_sets(relevance: np.ndarray, membership, threshold: float, cap: int, question_ids: Sequence[str],
                  memory_ids: Sequence[str], name: str) -> pd.DataFrame:
    """M′ of every question for one (threshold, cap), as set rows ``retriever, question_id, chunk_id``."""
    from pmrag.retrieve import graph_interest as gi

    chosen = gi.choose_interests(relevance, threshold, cap)
    return gi.reached_sets(gi.reached(chosen, membership), question_ids, memory_ids, name)


def tune_interest_choice(relevance: np.ndarray, membership, question_ids: Sequence[str], memory_ids: Sequence[str],
                         qrels: Qrels | pd.DataFrame, tuning_ids: Sequence[str], thresholds: Sequence[float],
                         caps: Sequence[int]) -> tuple[pd.DataFrame, tuple[float, int]]:
    """Macro set precision/recall/F1, mean |M′| and empty sets on the tuning questions for every (threshold, cap),
    the caps with the number of interests added (no cap), and the chosen pair (module docstring).  Columns
    ``threshold, cap, set_precision, set_recall, set_f1, mean_retrieved, empty_sets, chosen, edge``."""
    from pmrag.retrieve import graph_interest as gi

    rows_of = np.isin(np.asarray(question_ids, dtype=object), np.asarray(list(tuning_ids), dtype=object))
    tuning = [q for q, kept in zip(question_ids, rows_of) if kept]
    if not tuning:
        raise ValueError("no tuning question: the threshold and cap cannot be chosen")
    in_order = np.argsort(np.asarray(tuning, dtype=object), kind="stable")   # question ID order, as set_counts sums
    gold, n_gold = _gold_matrix(Qrels.of(qrels), [tuning[i] for i in in_order], memory_ids)
    tuning_relevance = relevance[rows_of][in_order]
    caps = sorted({int(cap) for cap in caps} | {max(relevance.shape[1], 1)})
    rows = []
    for threshold in sorted({float(t) for t in thresholds}):
        for cap in caps:
            reach = gi.reached(gi.choose_interests(tuning_relevance, threshold, cap), membership)
            rows.append({"threshold": threshold, "cap": cap,
                         **macro_set_scores((reach & gold).sum(axis=1), reach.sum(axis=1), n_gold)})
    grid = pd.DataFrame(rows)
    tie_break = (*larger_first(grid["threshold"]), grid["cap"].to_numpy())    # the larger threshold, the smaller cap
    best = grid.index[select(grid, tie_break, metrics=TUNING_METRICS)]
    grid["chosen"] = grid.index == best
    grid["edge"] = [grid_edges(t, c, grid["threshold"], grid["cap"]) for t, c in zip(grid["threshold"], grid["cap"])]
    return grid, (float(grid.loc[best, "threshold"]), int(grid.loc[best, "cap"]))


def _gold_matrix(qrels: Qrels, questions: Sequence[str], memory_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Primary gold of ``questions`` as a boolean questions × memories matrix (rows in ``questions`` order, columns
    in ``memory_ids`` order) and |G| of each question; a gold chunk that is no memory counts in |G|, never as a hit."""
    judged = qrels.frame
    gold = judged[judged["relevance"] >= PRIMARY]
    rows = pd.Index(list(questions), dtype=object).get_indexer(gold["question_id"])
    columns = pd.Index(list(memory_ids), dtype=object).get_indexer(gold["chunk_id"])
    matrix = np.zeros((len(questions), len(memory_ids)), dtype=bool)
    inside = (rows >= 0) & (columns >= 0)
    matrix[rows[inside], columns[inside]] = True
    return matrix, gold_sizes(qrels, questions)


def grid_edges(threshold: float, cap: int, thresholds, caps) -> str:
    """Which edges of the tuning grid a cell lies on (``""`` inside): "lowest threshold", "highest threshold",
    "smallest cap", "no cap" (the largest cap, the number of interests), joined by ", "."""
    thresholds, caps = np.asarray(thresholds, dtype=float), np.asarray(caps)
    edges = []
    if len(np.unique(thresholds)) > 1:
        edges += ["lowest threshold"] * bool(threshold == thresholds.min())
        edges += ["highest threshold"] * bool(threshold == thresholds.max())
    if len(np.unique(caps)) > 1:
        edges += ["smallest cap"] * bool(cap == caps.min()) + ["no cap"] * bool(cap == caps.max())
    return ", ".join(edges)


def tune_k(rankings: pd.DataFrame, qrels: Qrels | pd.DataFrame, tuning_ids: Sequence[str],
           ks: Sequence[int]) -> tuple[pd.DataFrame, dict[str, int]]:
    """Each ranked method's k chosen on the tuning questions by the graph's criterion (macro set F1, then set
    recall, then the smaller k), from its top-k sets (:func:`~pmrag.evaluate.set_metrics.top_k_set`) for every k
    of ``ks``.  ``rankings``: rows ``retriever, question_id, rank, chunk_id`` deep enough for the largest k.
    Returns rows ``method, k, set_precision, set_recall, set_f1, mean_retrieved, empty_sets, chosen, edge``
    (``edge``: "smallest k" or "largest k" where the cell lies there) and ``{method: chosen k}``."""
    tuning = sorted(set(tuning_ids))
    if not tuning:
        raise ValueError("no tuning question: k cannot be chosen")
    qrels = Qrels.of(qrels)
    ks = sorted({int(k) for k in ks})
    n_gold = gold_sizes(qrels, tuning)
    frames, chosen = [], {}
    for method in dict.fromkeys(rankings["retriever"]):
        counts = top_k_counts(rankings[rankings["retriever"] == method], qrels, tuning, ks)
        grid = pd.DataFrame([{"method": method, "k": k, **macro_set_scores(*counts[k], n_gold)} for k in ks])
        best = grid.index[select(grid, (grid["k"].to_numpy(),), metrics=TUNING_METRICS)]
        grid["chosen"] = grid.index == best
        grid["edge"] = ["smallest k" if k == ks[0] and len(ks) > 1 else "largest k" if k == ks[-1] and len(ks) > 1
                        else "" for k in grid["k"]]
        chosen[str(method)] = int(grid.loc[best, "k"])
        frames.append(grid)
    return pd.concat(frames, ignore_index=True), chosen


def summary_pieces(summaries: pd.DataFrame, size: int, overlap: int) -> pd.DataFrame:
    """RAGv1's pieces: each memory's summary (``chunk_id, summary``) cut into windows of ``size`` characters
    starting every ``size − overlap`` characters, the last one ending at the text's end (a summary no longer
    than ``size`` is one piece; an empty one none).  Columns ``piece_id`` (``<memory>#<n>``), ``memory_id``,
    ``text``."""
    if overlap >= size:
        raise ValueError(f"overlap ({overlap}) must be less than size ({size})")
    step = size - overlap
    rows = []
    for memory_id, text in zip(summaries["chunk_id"], summaries["summary"]):
        text = text if isinstance(text, str) else ""
        starts = range(0, max(len(text) - overlap, 1), step) if text else range(0)
        for n, start in enumerate(starts):
            rows.append((f"{memory_id}#{n}", memory_id, text[start:start + size]))
    return pd.DataFrame(rows, columns=["piece_id", "memory_id", "text"])


def top_memories_by_pieces(similarity: np.ndarray, question_ids: Sequence[str], pieces: pd.DataFrame, k: int,
                           name: str) -> pd.DataFrame:
    """RAGv1's ranking of memories: each memory at the rank of its best piece (its pieces' highest cosine; ties:
    the earlier piece), the k first per question (fewer only when fewer memories have a piece), as a ranking
    ``retriever, question_id, rank, chunk_id`` of memory ids.  ``similarity``: questions × pieces in
    ``pieces`` order (``piece_id, memory_id``)."""
    memory_codes, memory_ids = pd.factorize(pieces["memory_id"])
    n = len(memory_ids)
    best = np.full((similarity.shape[0], n), -np.inf)
    for column in range(n):
        own = np.flatnonzero(memory_codes == column)
        best[:, column] = similarity[:, own].max(axis=1)
    first_piece = np.array([np.flatnonzero(memory_codes == column)[0] for column in range(n)])
    order = np.lexsort((np.broadcast_to(first_piece, best.shape), -best), axis=1)[:, :min(k, n)]
    depth = order.shape[1]
    return pd.DataFrame({"retriever": name, "question_id": np.repeat(np.asarray(question_ids, dtype=object), depth),
                         "rank": np.tile(np.arange(1, depth + 1), len(question_ids)),
                         "chunk_id": np.asarray(memory_ids, dtype=object)[order].ravel()})


def top_k_by_similarity(similarity: np.ndarray, question_ids: Sequence[str], item_ids: Sequence[str], k: int,
                        name: str) -> pd.DataFrame:
    """The k most similar items per question as a ranking ``retriever, question_id, rank, chunk_id`` (ties: the
    earlier item), for :func:`pmrag.evaluate.set_metrics.top_k_set` / ``pieces_to_memories``."""
    k = min(k, similarity.shape[1])
    order = np.argsort(-similarity, axis=1, kind="stable")[:, :k]
    item_ids = np.asarray(item_ids, dtype=object)
    return pd.DataFrame({"retriever": name, "question_id": np.repeat(np.asarray(question_ids, dtype=object), k),
                         "rank": np.tile(np.arange(1, k + 1), len(question_ids)),
                         "chunk_id": item_ids[order].ravel()})


def best_flat(per_question: pd.DataFrame, candidates: Sequence[str], question_ids: Sequence[str]) -> str:
    """The candidate with the highest macro Recall@5 on ``question_ids`` (ties: nDCG@5, MRR@5, rounded to 12
    decimals, then the name; :mod:`pmrag.evaluate.select`)."""
    rows = per_question[per_question["retriever"].isin(candidates) & per_question["question_id"].isin(question_ids)]
    if rows.empty:
        raise ValueError("no flat retriever scored the tuning questions")
    means = rows.groupby("retriever")[list(map(str, PAPER_METRICS))].mean()
    return str(means.index[select(means, by_name(means.index))])


def set_tables(sets: pd.DataFrame, qrels: Qrels | pd.DataFrame, types: pd.Series, question_ids: Sequence[str],
               methods: Sequence[str], bootstrap, type_order: Sequence[str] | None = None) -> dict[str, pd.DataFrame]:
    """002 Table 2 on ``question_ids`` (the held-out part), the first of ``methods`` compared with the others:
    ``cis`` (macro set precision/recall/F1 of each method with percentile-bootstrap intervals), ``pooled``
    (micro figures from pooled counts, the closest reading of the paper's own numbers, with each method's mean
    set size and its empty sets, which pooled precision leaves out and macro precision scores 0), ``differences`` (first
    − each other in set F1, paired), ``by_type`` and ``recall_by_type`` (set F1 and set recall per question
    type, ``overall`` first)."""
    from pmrag.evaluate.reliability import by_type_cis, paired_differences
    from pmrag.evaluate.set_metrics import pooled_scores, set_counts, set_metric_cis

    ids = set(question_ids)
    qrels = Qrels.of(qrels)
    sets = sets[sets["question_id"].isin(ids)]
    rows = per_question_set_rows(sets, qrels, types, questions=sorted(ids), retrievers=methods)
    first, others = methods[0], list(methods[1:])
    return {
        "cis": set_metric_cis(rows, bootstrap),
        "pooled": pooled_scores(set_counts(sets, qrels, questions=sorted(ids), retrievers=methods)),
        "differences": paired_differences(rows, [(f"{first} − {b}", first, b) for b in others], SET_F1, bootstrap),
        "by_type": by_type_cis(rows, SET_F1, bootstrap, type_order),
        "recall_by_type": by_type_cis(rows, SET_RECALL, bootstrap, type_order),
    }


def rank_tables(rank_rows: pd.DataFrame, methods: Sequence[str], comparisons, bootstrap,
                type_order: Sequence[str] | None = None) -> dict[str, pd.DataFrame]:
    """The rank metrics of ``methods`` on the questions of ``rank_rows`` (the held-out part): ``cis``
    (Recall/MRR/nDCG@5 with intervals, in ``methods`` order), ``differences`` (``comparisons`` =
    ``[(label, a, b), ...]``, paired, in Recall@5) and ``by_type`` (Recall@5 per question type, ``overall``
    first)."""
    from pmrag.evaluate.reliability import by_type_cis, metric_cis, paired_differences

    rows = rank_rows[rank_rows["retriever"].isin(methods)]
    order = {m: i for i, m in enumerate(methods)}
    rows = rows.sort_values("retriever", key=lambda s: s.map(order), kind="stable")
    return {
        "cis": metric_cis(rows, 5, bootstrap),
        "differences": paired_differences(rows, comparisons, RECALL5, bootstrap),
        "by_type": by_type_cis(rows, RECALL5, bootstrap, type_order),
    }


def type_differences(evaluation, question_type: str, bootstrap=None) -> pd.DataFrame:
    """Paired bootstrap differences within one question type on the held-out part of a study's graph evaluation
    (:class:`GraphEvaluation`): the tuned graph and the graph + flat hybrid − the best flat
    retriever in Recall@5, and the first set method (TOBUGraph) − each other (the RAG baselines) in set recall."""
    from pmrag.evaluate.reliability import paired_differences

    rank = evaluation.held_out(evaluation.rank_rows)
    rank = rank[rank["question_type"] == question_type]
    sets = evaluation.held_out(evaluation.set_rows)
    sets = sets[sets["question_type"] == question_type]
    if rank.empty:
        return pd.DataFrame(columns=["comparison", "method_a", "method_b", "metric", "delta", "ci_low", "ci_high",
                                     "excludes_zero", "interpretation"])
    best = str(evaluation.best_flat)
    ranked = [(f"{m} − {best}", m, best) for m in (str(evaluation.tuned), str(evaluation.hybrid))]
    first, *others = list(dict.fromkeys(evaluation.set_rows["retriever"]))
    return pd.concat([paired_differences(rank, ranked, RECALL5, bootstrap),
                      paired_differences(sets, [(f"{first} − {b}", first, b) for b in others], SET_RECALL, bootstrap)],
                     ignore_index=True)


# ---------------------------------------------------------------------------------------------- the evaluation

GRAPH_VECTOR_REPRESENTATIONS = ("summary", "raw_text")   # RAGv2 and RAGv3 of 002 Table 1


@dataclass(frozen=True)
class GraphEvaluation:
    """TOBUGraph on the held-out questions: the split, the tuning grid and what it chose (and each RAG baseline's k,
    tuned the same way), the best flat retriever
    and the graph + flat hybrid, per-question set rows (Table 2) and rank rows of every method on every question,
    and the held-out tables."""

    split: pd.Series
    tuning: pd.DataFrame
    threshold: float
    cap: int
    tuned: RetrieverId
    best_flat: RetrieverId
    hybrid: HybridId
    set_rows: pd.DataFrame
    rank_rows: pd.DataFrame
    rankings: dict
    sets: pd.DataFrame
    label: str
    baseline_tuning: pd.DataFrame = field(default_factory=pd.DataFrame)   # tune_k's rows for RAGv1–v3
    baseline_k: dict = field(default_factory=dict)                        # RAG baseline → its k tuned
    set_tables: dict = field(default_factory=dict)    # held-out 002 Table 2: cis, pooled, differences, by_type
    rank_tables: dict = field(default_factory=dict)   # held-out rank metrics: cis, differences, by_type

    def rank_methods(self) -> list[str]:
        """The rank tables' methods: the tuned graph, the graph + flat hybrid, the best flat retriever, then the
        study's other retrievers (a listed graph retriever uses the params' fixed choice)."""
        return list(dict.fromkeys([str(self.tuned), str(self.hybrid), str(self.best_flat),
                                   *(name for name in self.rankings if name not in (str(self.tuned), str(self.hybrid)))]))

    def held_out(self, rows: pd.DataFrame) -> pd.DataFrame:
        """``rows`` of held-out questions only."""
        return rows[rows["question_id"].map(self.split).eq(HELD_OUT)].reset_index(drop=True)


def graph_retriever(retrievers: Sequence[RetrieverId]) -> RetrieverId:
    """The study's graph retriever: the first graph one listed, else the graph over summaries
    (``summary_graph_interest``)."""
    listed = [rid for rid in retrievers if rid.method == "graph"]
    return listed[0] if listed else RetrieverId("summary", "graph", "interest")


def _first_retriever(method) -> RetrieverId:
    """A retriever itself, or a hybrid's first retriever."""
    return method.first if isinstance(method, HybridId) else method


def evaluate_graph(questions: pd.DataFrame, qrels: pd.DataFrame, chunks: pd.DataFrame, summaries: pd.DataFrame,
                   built, relevance, query_vectors: np.ndarray, chunk_vectors: Mapping[str, np.ndarray],
                   rankings: Mapping[RetrieverId, pd.DataFrame], embed: Callable[[list[str]], np.ndarray], *,
                   section: GraphSection, betas: Sequence[float], depth: int, bootstrap: BootstrapSection,
                   ks: Sequence[int], type_order: Sequence[str]) -> GraphEvaluation:
    """TOBUGraph, its RAG baselines and the study's flat retrievers (module docstring), choices made on the tuning
    part of ``questions`` (the evaluable ones, in ID order) and every table on the held-out part.

    ``built`` is the memory graph (:class:`~pmrag.represent.graph.BuiltGraph`), ``relevance`` the interest
    relevance of every evaluable question (:class:`~pmrag.retrieve.graph_interest.InterestRelevance`),
    ``query_vectors`` their vectors in ``questions`` order, ``chunk_vectors`` the chunk vectors of the graph's
    representations, ``rankings`` every listed retriever's, ``embed`` the study's passage embedder (RAGv1's pieces).
    """
    from pmrag.evaluate.metrics import per_question_rows
    from pmrag.evaluate.set_metrics import top_k_set
    from pmrag.evaluate.sweep import select_best, sweep, sweep_macro
    from pmrag.retrieve import graph_interest as gi
    from pmrag.retrieve.dense import cosine_scores
    from pmrag.retrieve.fusion import minmax_fuse

    types = questions.set_index("question_id")["type"]
    judged = Qrels.of(qrels)
    chunk_ids = chunks["chunk_id"].to_numpy()
    start_times = pd.to_datetime(chunks["start_at"]).to_numpy()
    question_ids = questions["question_id"].tolist()
    index = gi.InterestIndex.from_graph(built.graph, list(chunk_ids))
    relevance = relevance.rows(question_ids)
    split = tuning_split(questions, section.tuning_fraction, section.tuning_seed)
    tuning_ids = split.index[split == TUNING].tolist()
    grid, (threshold, cap) = tune_interest_choice(relevance, index.membership, question_ids, chunk_ids, judged,
                                                  tuning_ids, section.threshold_grid, section.cap_grid)

    # sets: TOBUGraph with the tuned choice, and 002 Table 1's RAG baselines, each top-k by embeddings, k tuned
    depth_k = max(section.baseline_k_grid)
    pieces = summary_pieces(summaries[summaries["status"] == "ok"], section.piece_chars, section.piece_overlap)
    piece_vectors = embed(pieces["text"].tolist())
    similarity = {rep: cosine_scores(matrix, query_vectors) for rep, matrix in chunk_vectors.items()}
    baseline_rankings = pd.concat([
        top_memories_by_pieces(cosine_scores(piece_vectors, query_vectors), question_ids, pieces, depth_k, "RAGv1"),
        top_k_by_similarity(similarity["summary"], question_ids, chunk_ids, depth_k, "RAGv2"),
        top_k_by_similarity(similarity["raw_text"], question_ids, chunk_ids, depth_k, "RAGv3"),
    ], ignore_index=True)
    baseline_grid, baseline_k = tune_k(baseline_rankings, judged, tuning_ids, section.baseline_k_grid)
    sets = pd.concat([
        interest_sets(relevance, index.membership, threshold, cap, question_ids, chunk_ids, "TOBUGraph"),
        *(top_k_set(baseline_rankings[baseline_rankings["retriever"] == name], k) for name, k in baseline_k.items()),
    ], ignore_index=True)
    set_rows = per_question_set_rows(sets, judged, types, questions=question_ids, retrievers=SET_METHODS)

    # rankings: the tuned graph, the study's flat retrievers, the graph + best flat hybrid (β on the tuning part)
    listed = list(rankings)
    graph_rid = graph_retriever(listed)
    tuned = RetrieverId(graph_rid.representation, "graph", "tuned")
    chosen = gi.choose_interests(relevance, threshold, cap)
    ranked = {str(tuned): gi.graph_rankings(gi.graph_scores(chosen, relevance, index.membership),
                                            similarity[graph_rid.representation], question_ids, chunk_ids,
                                            start_times, depth)}
    ranked.update({str(rid): frame for rid, frame in rankings.items()})
    rows = [per_question_rows(ranking, name, judged, types, ks) for name, ranking in ranked.items()]
    flat = [str(rid) for rid in listed if rid.method != "graph"]
    best = RetrieverId.parse(best_flat(pd.concat(rows, ignore_index=True), flat, tuning_ids))
    tuning_qrels = qrels[qrels["question_id"].isin(tuning_ids)]
    graph_part, flat_part = (ranked[str(rid)][ranked[str(rid)]["question_id"].isin(tuning_ids)] for rid in (tuned, best))
    beta = float(select_best(sweep_macro(sweep(graph_part, flat_part, tuning_qrels, betas), str(tuned), str(best)))["beta"])
    hybrid = HybridId(tuned, best, beta)
    ranked[str(hybrid)] = minmax_fuse(ranked[str(tuned)], ranked[str(best)], beta)
    rows.append(per_question_rows(ranked[str(hybrid)], str(hybrid), judged, types, ks))
    rank_rows = pd.concat(rows, ignore_index=True)

    held_out = split.index[split == HELD_OUT].tolist()
    value = GraphEvaluation(split, grid, threshold, cap, tuned, best, hybrid, set_rows, rank_rows, ranked, sets,
                            built.label, baseline_grid, baseline_k)
    comparisons = [(f"{name} − {best}", name, str(best)) for name in value.rank_methods()
                   if _first_retriever(parse_method(name)).method == "graph"]
    value.set_tables.update(set_tables(sets, judged, types, held_out, SET_METHODS, bootstrap, type_order))
    value.rank_tables.update(rank_tables(value.held_out(rank_rows), value.rank_methods(), comparisons, bootstrap,
                                         type_order))
    return value
