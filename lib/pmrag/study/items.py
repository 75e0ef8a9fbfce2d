"""Which items a study's per-item stages exist for, read off the params and the components they list."""

from __future__ import annotations

from pathlib import Path

from pmrag.core.names import RetrieverId, StageKey
from pmrag.core.params import StudyParams
from pmrag.evaluate.graph_eval import GRAPH_VECTOR_REPRESENTATIONS, graph_retriever
from pmrag.retrieve.retrievers import SUB_QUERIES

GRAPH_PROMPTS = ("graph_semantic_system", "graph_semantic_user", "graph_interest_system", "graph_interest_user")
RELEVANCE_PROMPTS = ("graph_relevance_system", "graph_relevance_user")
DECOMPOSITION_PROMPTS = ("decompose_system", "decompose_user")
ANSWER_PROMPTS = ("answer_system", "answer_user")
JUDGE_PROMPTS = ("answer_judge_system", "answer_judge_user")


def retriever_component(rid: RetrieverId) -> type:
    """The registered component class of a retriever."""
    from pmrag.retrieve.registry import RETRIEVERS

    return RETRIEVERS.get(rid.method)


def retriever_classes(params: StudyParams, rid: RetrieverId) -> tuple[type, ...]:
    """A retriever's component and every component it runs (their code enters the ranking's key)."""
    component = retriever_component(rid)
    return (component, *component.uses(rid))


def listed(params: StudyParams) -> tuple[RetrieverId, ...]:
    """Every single retriever of the study, in list order."""
    return params.retrieval.retriever_ids()


def paired(params: StudyParams) -> tuple[RetrieverId, ...]:
    """The retrievers of the swept pairings, in pairing order."""
    return tuple(dict.fromkeys(rid for pair in params.hybrid.pairing_ids() for rid in pair))


def fused_many(params: StudyParams) -> tuple[RetrieverId, ...]:
    """The retrievers of hybrid.multi's lists, in list order."""
    return tuple(dict.fromkeys(RetrieverId.parse(name) for names in params.hybrid.multi for name in names))


def swept_pairings(params: StudyParams) -> tuple[RetrieverId, ...]:
    """The paired retrievers and the diagnostic hybrid's two."""
    diagnostic = params.analysis.diagnostic()
    return tuple(dict.fromkeys([*paired(params), diagnostic.first, diagnostic.second]))


def learned_retrievers(params: StudyParams) -> tuple[RetrieverId, ...]:
    """The retrievers the learned fusion fuses (``learned_fusion.retrievers``, else every listed one)."""
    return params.learned_fusion.retriever_ids(params.retrieval)


def retriever_needs(params: StudyParams) -> tuple[StageKey, ...]:
    """Every upstream stage some listed retriever's component declares, in the retriever list's order."""
    return tuple(dict.fromkeys(need for rid in listed(params) for need in retriever_component(rid).needs(rid)))


def graph_representations(params: StudyParams) -> tuple[str, ...]:
    """The representations whose chunk vectors the graph evaluation reads: RAGv2's and RAGv3's, and the graph
    retriever's."""
    return tuple(dict.fromkeys([*GRAPH_VECTOR_REPRESENTATIONS, graph_retriever(listed(params)).representation]))


GRAPH_STAGES = ("graph", "interest_relevance", "graph_evaluation")   # TOBUGraph's


def graph_stages(params: StudyParams) -> tuple[str, ...]:
    """Which of TOBUGraph's stages the study has: the graph evaluation when a notebook the study executes reads it
    (``notebooks``; every notebook when it is not set) or the answer step is on, the memory graph and interest
    relevance also when a listed retriever reads them."""
    from pmrag.study.notebooks import NOTEBOOK_READS

    declared = {int(stem.split("_")[0]): reads for stem, reads in NOTEBOOK_READS.items()}
    read = set(GRAPH_STAGES) if params.notebooks is None else {
        name for number in params.notebooks for name in declared.get(number, GRAPH_STAGES) if name in GRAPH_STAGES}
    if params.answers.enabled:   # the answer step reads TOBUGraph's and the RAG baselines' sets
        read.add("graph_evaluation")
    if "graph_evaluation" in read:
        read |= {"graph", "interest_relevance"}
    read |= {need.name for need in retriever_needs(params) if need.name in GRAPH_STAGES}
    return tuple(name for name in GRAPH_STAGES if name in read)


def embedded_representations(params: StudyParams) -> tuple[str, ...]:
    """Representations whose chunk vectors some listed retriever reads, in the retriever list's order."""
    return tuple(need.item for need in retriever_needs(params) if need.name == "vectors")


def prompt_files(prompts: str, names: tuple[str, ...]) -> tuple[Path, ...]:
    from pmrag.represent.representations import prompt_dir

    return tuple(prompt_dir(prompts) / f"{name}.txt" for name in names)


def stage_items(params: StudyParams, notebooks: list[Path]) -> dict[str, tuple]:
    """Each stage of the study (in dependency order) and the items it is made for (``("",)``: once)."""
    needs = retriever_needs(params)
    once = ("",)
    graph = graph_stages(params)
    return {
        "synthetic": once if params.dataset.synthetic.enabled else (),
        "ingest": once, "chunks": once, "chunk_table": once, "qrels": once, "summaries": once, "representations": once,
        "coverage": once, "representation_profile": once, "private_strings": once,
        "vectors": tuple(dict.fromkeys([*embedded_representations(params),
                                        *(graph_representations(params) if "graph_evaluation" in graph else ())])),
        "subvectors": tuple(need.item for need in needs if need.name == "subvectors"),
        "decomposition": once if SUB_QUERIES in needs else (),
        "query_vectors": once, **{name: once if name in graph else () for name in GRAPH_STAGES[:2]},
        "runs": listed(params),
        "metrics": once, "sweep": once, "hybrids": once, "reliability": once, "failures": once,
        "selection_coverage": once, "statistics": once,
        "multifusion": once if params.hybrid.multi else (),
        "graph_evaluation": once if "graph_evaluation" in graph else (),
        "answers": once if params.answers.enabled else (),
        "learned_fusion": once if params.learned_fusion.enabled else (),
        "notebook": tuple(path.stem for path in notebooks),
    }
