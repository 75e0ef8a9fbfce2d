"""The study's stages: one function each, whose signature is its declaration (:mod:`pmrag.study.declare`).

Each stage hands typed values to the pipeline's functions and returns their result; the logic lives in the
pipeline's modules.  Which stages a study has, and for which items, is :mod:`pmrag.study.items`'; the keyed
views of the params they share are :mod:`pmrag.study.keyed`'s; the notebook stage is
:func:`pmrag.study.notebooks.notebook`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import pandas as pd

from pmrag.chunking.store import Chunked
from pmrag.core.names import HybridId, RetrieverId
from pmrag.core.store import INGESTED, stored_messages
from pmrag.core.params import (AnalysisSection, AnswersSection, BM25Section, BootstrapSection, ChunkingSection, DatasetSection,
                               DecompositionSection, EmbeddingSection, GraphSection, HybridSection,
                               LearnedFusionSection, MultiVectorSection, RepresentationsSection, RetrievalSection, StatisticsSection,
                               StudyParams, SummarizerSection, SyntheticSection)
from pmrag.evaluate.gold import EvaluationSet
from pmrag.ingest.pipeline import Ingested
from pmrag.represent.embed import QueryVectors, VectorSet, study_embedder
from pmrag.represent.representations import RepresentationProfile, representation_texts
from pmrag.represent.summarize import summaries_identity
from pmrag.study.declare import Each, Keys, Restricted, Runtime, Upstreams, stage
from pmrag.study.keyed import (CUT_KEYS, REPLY_KEYS, EmbeddingModel, MetricKs, PassageEmbedding,
                               QueryEmbedding, llm_settings, model_package, openai_package, vectors_note)
from pmrag.study.items import (ANSWER_PROMPTS, GRAPH_PROMPTS, JUDGE_PROMPTS, RELEVANCE_PROMPTS, DECOMPOSITION_PROMPTS,
                               fused_many, graph_representations, learned_retrievers, listed, paired, prompt_files,
                               retriever_classes, retriever_component, swept_pairings)

SYNTHETIC_DIR, VECTORS_DIR, RUNS_DIR, QRELS_FILE = "data", "vectors", "runs", "qrels.trec"
GOLD_DIR = "gold"   # judgments read from a store (dataset.questions: store:PATH#ANNOTATOR), as a questions file
GRAPH_NAME = "memory_graph"
# ------------------------------------------------------------------------------------------- data

@stage("generate the embedded demo corpus", outputs=lambda manifest, item: [
    f"{manifest['folder']}/{name}" for name in [*manifest["files"], manifest["questions_file"]]])
def synthetic(section: SyntheticSection, runtime: Runtime) -> dict:
    from pmrag.demo import generate_corpus

    manifest = generate_corpus(runtime.path(SYNTHETIC_DIR, "."), seed=section.seed, n_messages=section.n_messages,
                               n_questions=section.n_questions)
    return {**manifest, "folder": SYNTHETIC_DIR}


@stage("read every input file into the store, reconciled", reads_store=(INGESTED,),
       files=lambda p, item: [*p.dataset.inputs, *_questions_files(p)])
def ingest(synthetic: dict | None, dataset: Annotated[DatasetSection, Keys(
        "format", "permissive", "unknown_time_offset", "encoding", "merge_exports", "inputs", "questions",
        "synthetic.enabled")], runtime: Runtime) -> Ingested:
    from pmrag.annotate.export import questions_file
    from pmrag.ingest.pipeline import ingest_study, relative_to

    files, questions = [Path(p) for p in dataset.inputs], None
    if dataset.questions:
        questions = questions_file(dataset.questions, runtime.params_path, runtime.path(GOLD_DIR, "questions.json"))
    if synthetic is not None:
        folder = Path(runtime.run_dir) / synthetic["folder"]
        files, questions = files + [folder / name for name in synthetic["files"]], folder / synthetic["questions_file"]
    bases = [Path(runtime.run_dir)] + ([runtime.params_path.parent.parent] if runtime.params_path else [])
    return ingest_study(runtime.store, files, questions, dataset, relative_to(bases))


def _questions_files(params: StudyParams) -> list[Path]:
    from pmrag.annotate.export import questions_files

    return questions_files(params.dataset.questions, params.path)


@stage("session-bounded windows (§3.2) and chunk-level gold", reads_store=(INGESTED,))
def chunks(ingest: Ingested, chunking: ChunkingSection, runtime: Runtime) -> Chunked:
    from pmrag.chunking.store import chunk_study

    return chunk_study(runtime.store, chunking)   # chunks the messages ingest stored (worker processes at scale)


@stage("the chunks without their texts and messages (their ids, sources, sessions and times)")
def chunk_table(chunks: Chunked) -> pd.DataFrame:
    return chunks.chunks.drop(columns=["raw_text"])   # the texts are the representations' raw_text


@stage("evaluable questions and their qrels (qrels.trec)", outputs=lambda value, item: [QRELS_FILE])
def qrels(ingest: Ingested, chunks: Chunked, dataset: Annotated[DatasetSection, Keys("include_types", "exclude_types")],
          analysis: Annotated[AnalysisSection, Keys("aggregate_type")], runtime: Runtime) -> EvaluationSet:
    from pmrag.evaluate import trec
    from pmrag.evaluate.gold import evaluation_set

    evaluation = evaluation_set(ingest.questions, chunks.qrels, dataset, analysis, runtime.params_path)
    trec.write_qrels(runtime.path(QRELS_FILE), evaluation.qrels)
    return evaluation


@stage(lambda p, item: f"chunk summaries ({p.summarizer.label()})", resumable=True,
       files=lambda p, item: prompt_files(p.representations.prompts, ("summary_system", "summary_user")),
       packages=openai_package(lambda p: p.summarizer.backend), identity=summaries_identity,
       finished=lambda summaries: bool((summaries["status"] == "ok").all()))   # failed ones: retried next run
def summaries(chunks: Chunked, summarizer: Annotated[SummarizerSection, Keys(*REPLY_KEYS)],
              texts: Annotated[RepresentationsSection, Keys("prompts")], runtime: Runtime) -> pd.DataFrame:
    from pmrag.represent.summarize import summarize_study

    return summarize_study(runtime.store, chunks.chunks, summarizer, texts.prompts, resuming=runtime.resuming,
                           allow_remote=runtime.allow_remote, proxy=runtime.proxy, progress=runtime.progress)


@stage("raw_text, summary and embedding_text of every chunk (§3.3)",
       files=lambda p, item: prompt_files(p.representations.prompts, ("embedding_prefix", "excerpt_label")))
def representations(chunks: Chunked, summaries: pd.DataFrame, section: RepresentationsSection) -> pd.DataFrame:
    from pmrag.represent.representations import EmbeddingTextTemplate, build_representations

    template = EmbeddingTextTemplate.from_prompts(section.prompts, section.excerpt_chars)
    return build_representations(chunks.chunks, summaries, template)


@stage("each chunk's representation lengths and one example chunk in all three forms (§3.3)")
def representation_profile(representations: pd.DataFrame, qrels: EvaluationSet) -> RepresentationProfile:
    from pmrag.represent.representations import representation_profile as profile

    return profile(representations, qrels.qrels)


@stage("what a public export must never contain: sources, senders, question and message texts (§9.2)",
       reads_store=(INGESTED,))
def private_strings(ingest: Ingested, chunk_table: pd.DataFrame, runtime: Runtime) -> dict[str, set[str]]:
    from pmrag.present.public import stored_private_strings

    return stored_private_strings(runtime.store, chunk_table, ingest.questions)


@stage("what the study loses: messages in no chunk, questions dropped, evidence each retriever never sees",
       components=lambda p, item: [retriever_component(rid) for rid in p.retrieval.retriever_ids()],
       reads_store=(INGESTED,))
def coverage(ingest: Ingested, chunks: Chunked, qrels: EvaluationSet,
             representations: pd.DataFrame, chunking: Annotated[ChunkingSection, Keys("trim_policy")],
             retrieval: Annotated[RetrievalSection, Keys("retrievers")],
             embedding: Annotated[EmbeddingSection, Keys(*CUT_KEYS)], texts: RepresentationsSection,
             summarizer: Annotated[SummarizerSection, Keys("max_input_chars")], runtime: Runtime):
    from pmrag.evaluate.coverage import coverage_report, evidence_messages, session_coverage

    evaluated = qrels.questions["question_id"]
    rendered = stored_messages(runtime.store, ids=evidence_messages(ingest.evidence, chunks.members, evaluated))
    return coverage_report(session_coverage(chunks.sessions), rendered, chunks.members, ingest.evidence,
                           ingest.questions, ingest.rejections, representations, retrieval.retriever_ids(), evaluated,
                           qrels.excluded_types, chunking=chunking, embedding=embedding, representations=texts,
                           summarizer=summarizer)


# ------------------------------------------------------------------------------------------- vectors

@stage(lambda p, representation: f"{representation} vectors{vectors_note(p)}", item="representation",
       packages=model_package,
       outputs=lambda value, item: [value.path, value.sidecar])
def vectors(representation: str, representations: pd.DataFrame, embedding: PassageEmbedding,
            runtime: Runtime) -> VectorSet:
    from pmrag.represent.embed import embed_representation

    texts = list(zip(representations["chunk_id"], representation_texts(representations, representation)))
    with study_embedder(embedding, runtime.cache_dir, runtime.allow_remote, runtime.proxy) as (embedder, cache):
        path = embed_representation(runtime.store, cache, embedder, representation, texts,
                                    runtime.path(VECTORS_DIR, "."), embedding, progress=runtime.progress)
    return VectorSet(representation, embedder.model_id, runtime.relative(path))


@stage(lambda p, representation: f"{representation} sub-window vectors (multi-vector retrieval)",
       item="representation", packages=model_package)
def subvectors(representation: str, representations: pd.DataFrame, embedding: PassageEmbedding,
               multivector: Annotated[MultiVectorSection, Keys("window_lines", "stride_lines")], runtime: Runtime):
    from pmrag.represent.subwindows import subwindow_vectors

    texts = representation_texts(representations, representation)
    return subwindow_vectors(representations["chunk_id"].to_numpy(), texts, representation, multivector=multivector,
                             embedding=embedding, cache_dir=runtime.cache_dir, allow_remote=runtime.allow_remote,
                             proxy=runtime.proxy, progress=runtime.progress)


@stage(lambda p, item: f"question vectors (§5.2){vectors_note(p)}", packages=model_package)
def query_vectors(ingest: Ingested, embedding: QueryEmbedding, runtime: Runtime) -> QueryVectors:
    from pmrag.represent.embed import embed_with_cache

    with study_embedder(embedding, runtime.cache_dir, runtime.allow_remote, runtime.proxy) as (embedder, cache):
        matrix = embed_with_cache(embedder, ingest.questions["text"].tolist(), "query", cache, progress=runtime.progress)
    return QueryVectors(matrix, ingest.questions["question_id"].tolist())


_DecompositionLLM, _DecompositionPrompts = llm_settings(lambda p: p.decomposition.backend)


@stage(lambda p, item: f"sub-queries of every question ({p.decomposition.backend})",
       files=lambda p, item: (prompt_files(p.representations.prompts, DECOMPOSITION_PROMPTS)
                              if p.decomposition.backend == "openai" else ()),
       packages=lambda p, item: (*model_package(p, item), *(("openai",) if p.decomposition.backend == "openai"
                                                             else ("sudachipy", "sudachidict_core"))))
def decomposition(qrels: EvaluationSet, section: DecompositionSection, embedding: QueryEmbedding,
                  llm: _DecompositionLLM, prompts: _DecompositionPrompts, runtime: Runtime):
    from pmrag.retrieve.subqueries import decompose_questions

    questions = qrels.questions
    return decompose_questions(questions["question_id"].astype(str).tolist(), questions["text"].tolist(), section,
                               embedding=embedding, cache_dir=runtime.cache_dir, llm=llm, prompts=prompts.prompts,
                               engine=runtime.store, allow_remote=runtime.allow_remote, proxy=runtime.proxy,
                               progress=runtime.progress)


# ------------------------------------------------------------------------------------------- TOBUGraph

_GraphLLM, _GraphPrompts = llm_settings(lambda p: p.graph.extractor)
_GRAPH_BUILD = ("memory_unit", "extractor", "split_mode", "interest_rule", "min_memories", "merge_distance",
                "max_interests", "max_phrases", lambda p, item: ("interest_batch",) if p.graph.extractor == "openai" else ())


@stage(lambda p, item: f"TOBUGraph's memory graph ({p.graph.label()})",
       files=lambda p, item: prompt_files(p.representations.prompts, GRAPH_PROMPTS) if p.graph.extractor == "openai"
       else (), packages=lambda p, item: ("sudachipy", "sudachidict_core", "scikit-learn", *model_package(p, item),
                                          *openai_package(lambda q: q.graph.extractor)(p, item)),
       reads_store=(INGESTED,))
def graph(ingest: Ingested, chunks: Chunked, summaries: pd.DataFrame, section: Annotated[GraphSection,
          Keys(*_GRAPH_BUILD)], embedding: EmbeddingModel, llm: _GraphLLM, prompts: _GraphPrompts, runtime: Runtime):
    from pmrag.represent.embed import embed_with_cache
    from pmrag.represent.extract import make_extractor
    from pmrag.represent.graph import memory_graph, write_graph

    with study_embedder(embedding, runtime.cache_dir, runtime.allow_remote, runtime.proxy) as (embedder, cache):
        embed = lambda texts: embed_with_cache(embedder, list(texts), "passage", cache,   # noqa: E731
                                               progress=runtime.progress)
        extras = dict(progress=runtime.progress) if section.extractor == "offline" else dict(
            llm=llm, prompts=prompts.prompts, allow_remote=runtime.allow_remote, proxy=runtime.proxy,
            engine=runtime.store, progress=runtime.progress)
        built = memory_graph(chunks.chunks, chunks.members, stored_messages(runtime.store), summaries,
                             make_extractor(section, embedder=embed, **extras), embed, unit=section.memory_unit)
    write_graph(runtime.store, built.graph, GRAPH_NAME)
    return built


_RelevanceLLM, _RelevancePrompts = llm_settings(lambda p: p.graph.relevance)
_offline_relevance = lambda keys: lambda p, item: keys if p.graph.relevance == "offline" else ()   # noqa: E731


@stage(lambda p, item: f"interest relevance f(q, I) of every question ({p.graph.relevance})",
       files=lambda p, item: prompt_files(p.representations.prompts, RELEVANCE_PROMPTS)
       if p.graph.relevance == "openai" else (),
       packages=lambda p, item: ("openai",) if p.graph.relevance == "openai" else ("sudachipy", "sudachidict_core"))
def interest_relevance(graph, qrels: EvaluationSet, query_vectors: QueryVectors, section: Annotated[
        GraphSection, Keys("relevance", _offline_relevance(("lexical_weight", "cosine_floor", "split_mode")))],
        bm25: Annotated[BM25Section, Keys(_offline_relevance(("k1", "b")))], llm: _RelevanceLLM,
        prompts: _RelevancePrompts, runtime: Runtime):
    from pmrag.retrieve.graph_interest import relevance_of

    question_ids = qrels.questions["question_id"].tolist()
    return relevance_of(question_ids, qrels.questions["text"].tolist(), graph, query_vectors.rows(question_ids),
                        section, bm25, llm=llm, prompts=prompts.prompts, engine=runtime.store,
                        allow_remote=runtime.allow_remote, proxy=runtime.proxy, progress=runtime.progress)


# ------------------------------------------------------------------------------------------- rankings

@stage(lambda p, rid: f"{rid} rankings", item="retriever", components=retriever_classes,
       files=lambda p, rid: retriever_component(rid).files(rid, p),
       packages=lambda p, rid: retriever_component(rid).packages(rid),
       outputs=lambda ranked, rid: [f"{RUNS_DIR}/{rid.file_stem()}.trec"])
def runs(retriever: RetrieverId, chunk_table: pd.DataFrame, qrels: EvaluationSet,
         retrieval: Annotated[RetrievalSection, Keys("depth")],
         params: Annotated[StudyParams, Restricted(lambda p, rid: retriever_component(rid).sections)],
         upstream: Annotated[dict, Upstreams(lambda p, rid: retriever_component(rid).needs(rid))],
         runtime: Runtime):
    from pmrag.core.store import write_rankings
    from pmrag.evaluate import trec
    from pmrag.retrieve.retrievers import QUERY_VECTORS, Corpus, Queries

    questions = qrels.questions
    corpus = Corpus.of(chunk_table, upstream.__getitem__, lambda found: found.load(runtime.store, runtime.run_dir))
    queries = Queries(questions["question_id"].tolist(), questions["text"].tolist(),
                      lambda: upstream[QUERY_VECTORS].rows(questions["question_id"]))
    ranked = retriever_component(retriever)(retriever, params).rank(corpus, queries, retrieval.depth)
    write_rankings(runtime.store, str(retriever), ranked.rankings)
    trec.write_run(runtime.path(RUNS_DIR, f"{retriever.file_stem()}.trec"), ranked.rankings, tag=retriever.run_tag(),
                   depth=retrieval.depth, scores="rank")
    return ranked


def _rankings(runs: Mapping) -> dict:
    return {rid: ranked.rankings for rid, ranked in runs.items()}


# ------------------------------------------------------------------------------------------- evaluation

@stage("per-question Recall/MRR/nDCG of every retriever")
def metrics(qrels: EvaluationSet, runs: Annotated[dict, Each("runs", listed)], ks: MetricKs) -> pd.DataFrame:
    from pmrag.evaluate.metrics import per_question_table

    return per_question_table({str(rid): ranked.rankings for rid, ranked in runs.items()}, qrels.qrels, qrels.types(),
                              ks)


@stage("min-max hybrid of every pairing × β (§6.2)")
def sweep(qrels: EvaluationSet, runs: Annotated[dict, Each("runs", paired)], hybrid: Annotated[HybridSection, Keys(
        "pairings", "beta_step", "fusions", "rrf_k")]) -> pd.DataFrame:
    from pmrag.evaluate.sweep import sweep_pairings

    rankings = {str(rid): ranked.rankings for rid, ranked in runs.items()}
    return sweep_pairings(rankings, qrels.qrels, hybrid.pairing_ids(), hybrid.betas(), k=5, fusions=hybrid.fusions,
                          rrf_k=hybrid.rrf_k)


@stage("each pairing's selected β, the best hybrid, their fused runs",
       outputs=lambda value, item: [f"{RUNS_DIR}/{h.file_stem()}.trec" for h in value.ids()])
def hybrids(qrels: EvaluationSet, sweep: pd.DataFrame, runs: Annotated[dict, Each("runs", swept_pairings)],
            hybrid: Annotated[HybridSection, Keys("pairings", "selection")], analysis: Annotated[AnalysisSection,
            Keys("diagnostic_hybrid")], ks: MetricKs, runtime: Runtime):
    from pmrag.evaluate import trec
    from pmrag.evaluate.sweep import select_hybrids

    def write(configuration: HybridId, fused: pd.DataFrame) -> None:
        trec.write_run(runtime.path(RUNS_DIR, f"{configuration.file_stem()}.trec"), fused, tag=configuration.run_tag(),
                       depth=len(fused), scores="rank")

    return select_hybrids(sweep, _rankings(runs), qrels.qrels, qrels.types(), hybrid.selection_pairing_ids(),
                          analysis.diagnostic(), ks, write)


Analysis = Annotated[AnalysisSection, Keys("reference_retriever", "diagnostic_hybrid")]


def _selection(hybrids, analysis: AnalysisSection):
    from pmrag.evaluate.analysis import Selection

    return Selection(hybrids.selected, RetrieverId.parse(analysis.reference_retriever), analysis.diagnostic())


@stage("bootstrap intervals and paired differences (§4.4, §6.3–6.4)")
def reliability(qrels: EvaluationSet, metrics: pd.DataFrame, hybrids, bootstrap: BootstrapSection, analysis: Analysis):
    from pmrag.evaluate.analysis import question_types, reliability_tables

    per_question = pd.concat([metrics, hybrids.per_question], ignore_index=True)
    return reliability_tables(per_question, _selection(hybrids, analysis), bootstrap, question_types(qrels.questions))


@stage("Top-K failures, rule-based labels, recoverability, overlap (§7)")
def failures(qrels: EvaluationSet, chunks: Chunked, metrics: pd.DataFrame, hybrids, analysis: Annotated[
        AnalysisSection, Keys("reference_retriever", "diagnostic_hybrid", "failure_k", "recovery_ks", "aggregate_type",
                              "min_primary_gold")]):
    from pmrag.evaluate.analysis import failure_tables, question_types

    per_question = pd.concat([metrics, hybrids.per_question], ignore_index=True)
    return failure_tables(per_question, _selection(hybrids, analysis), qrels.qrels, chunks.chunks, analysis,
                          question_types(qrels.questions), qrels.tags())


@stage("coverage, width and bias of the selected hybrid's intervals over studies simulated from these questions "
       "(§8.1)", packages=lambda p, item: ("threadpoolctl",))
def selection_coverage(sweep: pd.DataFrame, hybrid: Annotated[HybridSection, Keys("pairings", "selection")],
                       section: Annotated[StatisticsSection, Keys("coverage_datasets", "coverage_resamples")],
                       bootstrap: Annotated[BootstrapSection, Keys("seed", "confidence")]):
    """A stage of its own, keyed on the keys it reads: a change to B alone (``bootstrap.n_resamples``) leaves its
    D × B simulation cached (at the paper's scale ~3 s of the statistics)."""
    from pmrag.evaluate.statistics import coverage_check

    return coverage_check(sweep, hybrid.selection_pairing_ids(), section, bootstrap)


@stage("selection-aware intervals, evidence groups, many comparisons, power (§8.1, §9.1)",
       packages=lambda p, item: ("scikit-learn", "scipy"))
def statistics(ingest: Ingested, qrels: EvaluationSet, chunks: Chunked, metrics: pd.DataFrame, sweep: pd.DataFrame,
               hybrids, selection_coverage, runs: Annotated[dict, Each("runs", listed)], section: StatisticsSection,
               bootstrap: BootstrapSection, hybrid: Annotated[HybridSection, Keys("pairings", "selection", "fusions")],
               analysis: Analysis, ks: MetricKs):
    from pmrag.evaluate.statistics import selection_statistics

    return selection_statistics(sweep, pd.concat([metrics, hybrids.per_question], ignore_index=True), _rankings(runs),
                                hybrids.ids(), hybrids.selected, analysis.reference_retriever, qrels.qrels,
                                qrels.types(), ingest.evidence, chunks.members, pairings=hybrid.selection_pairing_ids(),
                                broader=hybrid.pairing_ids(),
                                fusions=hybrid.fusions, section=section, bootstrap=bootstrap, ks=ks,
                                diagnostic=analysis.diagnostic(), coverage=selection_coverage,
                                hybrid_rankings=hybrids.rankings)


@stage("fusions of three or more retrievers, weights chosen on training folds and scored out of fold",
       packages=lambda p, item: ("scikit-learn",))
def multifusion(qrels: EvaluationSet, runs: Annotated[dict, Each("runs", fused_many)],
                hybrid: Annotated[HybridSection, Keys("multi", "multi_fusions", "multi_equal", "multi_step",
                                                      "multi_grid_max", "rrf_k")],
                section: Annotated[StatisticsSection, Keys("n_splits", "n_repeats", "seed", "n_seeds")]):
    from pmrag.evaluate.multisweep import multi_fusions

    return multi_fusions({str(rid): ranked.rankings for rid, ranked in runs.items()}, hybrid.multi, qrels.qrels,
                         qrels.types(), fusions=hybrid.multi_fusions, equal=hybrid.multi_equal, step=hybrid.multi_step,
                         grid_max=hybrid.multi_grid_max, rrf_k=hybrid.rrf_k, n_splits=section.n_splits,
                         n_repeats=section.n_repeats, seed=section.seed, n_seeds=section.n_seeds)


@stage("learned fusion of the listed retrievers, scored out of fold (beyond the paper)",
       packages=lambda p, item: ("scikit-learn",))
def learned_fusion(qrels: EvaluationSet, chunks: Chunked, runs: Annotated[dict, Each("runs", learned_retrievers)],
                   section: Annotated[LearnedFusionSection, Keys("models", "folds", "depth", "seed", "positive",
                                                                 "iterations", "importance_repeats")], ks: MetricKs):
    from pmrag.evaluate.learned import learned_fusion as fit

    return fit({str(rid): ranked.rankings for rid, ranked in runs.items()}, qrels.qrels, qrels.types(), chunks.chunks,
               models=section.models, folds=section.folds, depth=section.depth, seed=section.seed,
               positive=section.positive, iterations=section.iterations,
               importance_repeats=section.importance_repeats, ks=ks, threads=section.threads)


@stage("TOBUGraph vs RAGv1–v3 and the flat retrievers, choices tuned on one part of the questions",
       packages=model_package)
def graph_evaluation(qrels: EvaluationSet, chunks: Chunked, summaries: pd.DataFrame, graph, interest_relevance,
                     query_vectors: QueryVectors, vectors: Annotated[dict, Each("vectors", graph_representations)],
                     runs: Annotated[dict, Each("runs", listed)], section: GraphSection,
                     hybrid: Annotated[HybridSection, Keys("beta_step")],
                     retrieval: Annotated[RetrievalSection, Keys("retrievers", "depth")], bootstrap: BootstrapSection,
                     ks: MetricKs, embedding: EmbeddingModel, runtime: Runtime):
    from pmrag.evaluate.analysis import question_types
    from pmrag.evaluate.graph_eval import evaluate_graph
    from pmrag.represent.embed import embed_with_cache

    chunk_vectors = {rep: found.load(runtime.store, runtime.run_dir)[0] for rep, found in vectors.items()}
    questions = qrels.questions
    with study_embedder(embedding, runtime.cache_dir, runtime.allow_remote, runtime.proxy) as (embedder, cache):
        return evaluate_graph(questions, qrels.qrels, chunks.chunks, summaries, graph, interest_relevance,
                              query_vectors.rows(questions["question_id"]), chunk_vectors, _rankings(runs),
                              lambda texts: embed_with_cache(embedder, list(texts), "passage", cache,
                                                             progress=runtime.progress),
                              section=section, betas=hybrid.betas(), depth=retrieval.depth, bootstrap=bootstrap,
                              ks=ks, type_order=question_types(questions))


_answer_models = lambda p: "openai" if "openai" in (p.answers.backend, p.answers.judge) else "none"   # noqa: E731
_AnswerLLM, _AnswerPrompts = llm_settings(_answer_models)
_AnswersKeys = Annotated[AnswersSection, Keys("enabled", "backend", "retrievers", "k", "max_context_chars",
                                              lambda p, item: ("judge", "judge_model") if p.answers.judge != "none"
                                              else ())]   # judge keys only when judged: turning it on recomputes


@stage(lambda p, item: f"answers citing their memories, from each retriever's output ({p.answers.backend}"
                       f"{', judged by openai' if p.answers.judge != 'none' else ''})",
       files=lambda p, item: (*(prompt_files(p.representations.prompts, ANSWER_PROMPTS)
                                if p.answers.backend == "openai" else ()),
                              *(prompt_files(p.representations.prompts, JUDGE_PROMPTS)
                                if p.answers.judge != "none" else ())),
       packages=lambda p, item: ("nltk", *openai_package(_answer_models)(p, item)),
       finished=lambda value: value.finished())   # failed calls: retried next run
def answers(qrels: EvaluationSet, chunks: Chunked, summaries: pd.DataFrame, graph, graph_evaluation, hybrids,
            section: _AnswersKeys, analysis: Annotated[AnalysisSection, Keys("reference_retriever")],
            llm: _AnswerLLM, prompts: _AnswerPrompts, runtime: Runtime):
    from pmrag.evaluate.answers import answer_study

    return answer_study(qrels.questions, qrels.qrels, chunks.chunks, summaries, graph, graph_evaluation,
                        hybrids.selected, section=section, reference=analysis.reference_retriever, llm=llm,
                        prompts=prompts.prompts, engine=runtime.store, allow_remote=runtime.allow_remote,
                        proxy=runtime.proxy, progress=runtime.progress)
