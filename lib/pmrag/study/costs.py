"""What a study's model stages still have to call, known before any call is made, and what that would cost.

For each model stage (the summaries, every ``vectors:*`` and ``subvectors:*``, ``query_vectors``, the query
decomposition, TOBUGraph's extraction and interest relevance) a pure function lists the items still missing
from the stage's store or cache, from the stage's inputs:

* **summaries** (:func:`summary_cost`): every chunk without an ``ok`` row of ``summaries``; a stage that does not
  resume its own run (its key changed) starts from an empty table, so then every chunk.
* **embeddings** (:func:`embedding_cost`): the distinct texts sent (shortened or windowed as
  :func:`~pmrag.represent.embed.passage_texts_sent` says) whose :func:`~pmrag.represent.embed.cache_key` has no
  usable entry in the embedding cache; one call per ``embedding.batch_size`` of them.
* **the other LLM steps** (:func:`llm_cost`): the items without an ``ok`` row of ``graph_extractions`` for the
  step, model, prompts and input (the rule a run resumes by); the question proposals of ``pmrag candidates
  --propose`` too (:func:`proposal_cost`), which are not a stage of the study.

Nothing here calls a model or computes a model stage: the inputs are upstream stages that are cached (``pmrag
status``) or computed because they call no model (ingest, chunks, qrels; ``pmrag study --dry-run``), and the
representations only once the summaries are cached.  A count that needs a model's output not made yet (the
summary texts before the summaries, the interests before the graph) is an upper bound, said ``≤``.

Tokens are estimated, said ``≈`` (:func:`approx_tokens`): a kana or kanji character as one token, any other
four characters as one (no tokenizer is bundled: the models' own differ).  An LLM call's input is its system
prompt, its user template and its text.  Output tokens are bounded by ``max_output_tokens`` per call.  Prices come
from the params' ``prices`` table only (:func:`price_text`); a model missing from it is named, never guessed.  The
ETA is the calls left at the rate the stage's last run measured (:func:`summaries_rate`, :func:`step_rate`; the
embedding cache records no times); while calls run, :class:`~pmrag.represent.llm.StepProgress` gives it live.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from pmrag.core.names import StageKey
from pmrag.core.params import HASHED_STAND_IN, EmbeddingSection, ModelPrice, SummarizerSection
from pmrag.represent.embed import EmbeddingCache, cache_key, embedder_model_id, passage_texts_sent
from pmrag.represent.llm import Done, Prompts, input_sha256
from pmrag.represent.representations import representation_texts

REMOTE_BACKENDS = frozenset({"openai"})
JAPANESE_RANGES = ((0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0xFF66, 0xFF9F))
"""The code points counted as kana or kanji (inclusive): hiragana and katakana, CJK extension A, the unified
ideographs, the compatibility ideographs, half-width katakana."""
COUNT_PIECE_CHARS = 1 << 20   # characters counted at a time (4 bytes each as code points)


def approx_tokens(chars: int, japanese_chars: int = 0) -> int:
    """Tokens of a text of ``chars`` characters, ``japanese_chars`` of them kana or kanji: one each, and one per
    four of the others (rounded up)."""
    return japanese_chars + math.ceil(max(chars - japanese_chars, 0) / 4)


def text_tokens(texts: Iterable[str]) -> tuple[int, int]:
    """``(characters, ≈ tokens)`` of ``texts`` together (:func:`approx_tokens`)."""
    chars = japanese = 0
    piece: list[str] = []
    held = 0
    for text in texts:
        piece.append(text)
        held += len(text)
        if held >= COUNT_PIECE_CHARS:
            chars, japanese, piece, held = chars + held, japanese + japanese_chars("".join(piece)), [], 0
    chars, japanese = chars + held, japanese + japanese_chars("".join(piece))
    return chars, approx_tokens(chars, japanese)


def japanese_chars(text: str) -> int:
    """How many characters of ``text`` lie in :data:`JAPANESE_RANGES`: its code points compared as an array (a
    regular expression's ``findall`` took 0.8 s over the paper-scale chunks, this 0.07 s)."""
    import numpy as np

    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    inside = np.zeros(len(codes), dtype=bool)
    for low, high in JAPANESE_RANGES:
        inside |= (codes >= low) & (codes <= high)
    return int(np.count_nonzero(inside))


@dataclass(frozen=True)
class StageCost:
    """One model stage's calls still to make.

    ``calls``: requests (first attempts; retries come on top), ``items``: what they carry (chunks, texts,
    questions, batches), ``input_chars`` / ``input_tokens`` (≈): what they send (``None``: unknown yet),
    ``max_output_tokens``: the cap of each call (``None``: no text output, embeddings), ``bound``: the numbers are
    an upper bound (a model's output they depend on is not made yet), ``state``: the stage's state
    (``cached``, ``missing``...), ``note``: why a number is a bound or unknown."""

    stage: str
    backend: str
    model: str
    calls: int | None          # None: unknown until an upstream model output exists
    items: int | None
    input_chars: int | None
    input_tokens: int | None
    max_output_tokens: int | None = None
    bound: bool = False
    state: str = ""
    note: str = ""
    rate_per_s: float | None = None   # calls a second measured in the stage's last run (None: no run yet)

    @property
    def eta_s(self) -> float | None:
        """Seconds the calls would take at the measured rate (``None``: no rate, or no count)."""
        if self.rate_per_s is None or not self.calls or self.rate_per_s <= 0:
            return None
        return self.calls / self.rate_per_s

    @property
    def local(self) -> bool:
        """A backend in this process (e5-local, the extractive and offline stand-ins): nothing to pay."""
        return self.backend not in REMOTE_BACKENDS

    @property
    def output_tokens(self) -> int | None:
        """The most output tokens the calls may return (``None``: embeddings return vectors)."""
        if self.max_output_tokens is None or self.calls is None:
            return None
        return self.calls * self.max_output_tokens


# --------------------------------------------------------------------------------------------- per stage

def llm_cost(stage: str, items: Sequence[tuple[str, str]], done: Mapping[str, Done], *, model: str,
             prompts: Prompts | None, max_output_tokens: int, backend: str = "openai",
             keeps_changed_input: bool = False, rate_per_s: float | None = None) -> StageCost:
    """An LLM step's calls: one per item ``(id, text sent after the template)`` that ``done`` (the store's ``ok``
    rows by item id) does not hold for that text (any text when ``keeps_changed_input``: the summaries' rule).
    The input counted is the system prompt, the user template, a blank line and the text; ``rate_per_s``: the
    calls a second the step's last run measured (the ETA)."""
    def resumed(item_id: str, text: str) -> bool:
        found = done.get(item_id)
        return found is not None and found.resumes(input_sha256(text), keeps_changed_input)

    sent = [prompts.render_input(text) if prompts else text for item_id, text in items
            if not resumed(item_id, text)]
    if prompts:
        sent = [prompts.system + text for text in sent]
    chars, tokens = text_tokens(sent)
    return StageCost(stage, backend, model, len(sent), len(sent), chars, tokens, max_output_tokens,
                     rate_per_s=rate_per_s)


def summary_cost(chunks: Sequence[tuple[str, str]], ok_chunks: Iterable[str], section: SummarizerSection,
                 prompts: Prompts | None, *, resumes: bool, stage: str = "summaries") -> StageCost:
    """The summaries stage's calls: a chunk ``(chunk_id, raw_text)`` is sent (its first ``max_input_chars``
    characters) unless it has an ``ok`` row (``ok_chunks``) and the stage resumes its own run (``resumes``;
    otherwise the stage starts from an empty table).  The extractive stand-in calls nothing remote."""
    done = {chunk_id: Done(None, "") for chunk_id in ok_chunks} if resumes else {}
    items = [(chunk_id, raw_text[: section.max_input_chars]) for chunk_id, raw_text in chunks]
    model = section.model if section.backend == "openai" else "extractive-v1"
    return llm_cost(stage, items, done, model=model, prompts=prompts, max_output_tokens=section.max_output_tokens,
                    backend=section.backend, keeps_changed_input=True)


def embedding_cost(stage: str, texts: Sequence[str], kind: str, section: EmbeddingSection,
                   cached_keys: Iterable[str]) -> StageCost:
    """An embedding stage's calls for ``texts``, already as sent (shortened or windowed): the distinct texts
    whose cache key (:func:`~pmrag.represent.embed.cache_key` of the section's model id) ``cached_keys`` lacks, in
    batches of ``embedding.batch_size``."""
    model_id = embedder_model_id(section)
    cached = set(cached_keys)
    missing = list(dict.fromkeys((t for t in texts if cache_key(model_id, kind, t) not in cached) if cached
                                 else texts))   # nothing cached: no key to work out
    chars, tokens = text_tokens(missing)
    model = section.resolved_query_model if kind == "query" else section.resolved_model
    return StageCost(stage, section.backend, model, math.ceil(len(missing) / section.batch_size), len(missing),
                     chars, tokens)


def cached_embedding_keys(cache: EmbeddingCache, texts: Sequence[str], kind: str,
                          section: EmbeddingSection) -> set[str]:
    """The cache keys of ``texts`` with a usable entry (the checks :func:`~pmrag.represent.embed.embed_with_cache`
    applies: model, kind, dimension, unit length for e5-local)."""
    model_id = embedder_model_id(section)
    keys = list(dict.fromkeys(cache_key(model_id, kind, t) for t in texts))
    return set(cache.get_many(keys, model_id=model_id, kind=kind, unit_length=section.backend == "e5-local"))


def bound_cost(stage: str, backend: str, model: str, calls: int | None, items: int | None, note: str,
               max_output_tokens: int | None = None) -> StageCost:
    """Calls known only as an upper bound, or not at all (``None``): their texts come from an output not made
    yet (``note`` says which)."""
    return StageCost(stage, backend, model, calls, items, None, None, max_output_tokens, bound=True, note=note)


# --------------------------------------------------------------------------------------------- prices

def price_text(cost: StageCost, prices: Mapping[str, ModelPrice]) -> str:
    """What the calls of ``cost`` would cost by ``prices`` (the params' table): ``local``, ``$0``, ``≈ $in + ≤
    $out``, or ``no price for model X in prices``."""
    if cost.local:
        return "local"
    if cost.calls == 0:
        return "$0"
    price = prices.get(cost.model)
    if price is None:
        return f"no price for model {cost.model} in prices"
    if cost.input_tokens is None or cost.calls is None:
        return "not known yet (below)"
    text = f"≈ ${cost.input_tokens * price.input_per_million / 1e6:.4f} in"
    if cost.output_tokens is not None:
        text += f" + ≤ ${cost.output_tokens * price.output_per_million / 1e6:.4f} out"
    return text


def price_total(costs: Sequence[StageCost], prices: Mapping[str, ModelPrice]) -> float | None:
    """The most the remote calls would cost (input ≈, output at its cap); ``None`` when a remote stage with calls
    has no price or unknown inputs."""
    total = 0.0
    for cost in costs:
        if cost.local or cost.calls == 0:
            continue
        price = prices.get(cost.model)
        if price is None or cost.input_tokens is None or cost.calls is None:
            return None
        total += cost.input_tokens * price.input_per_million / 1e6
        total += (cost.output_tokens or 0) * price.output_per_million / 1e6
    return total


def cost_lines(costs: Sequence[StageCost], prices: Mapping[str, ModelPrice], upstream: str) -> list[str]:
    """The cost table: a header naming where the inputs came from (``upstream``), one line per model stage, and
    the remote calls' total."""
    header = ("stage", "backend/model", "calls", "items", "input chars", "≈ input tokens", "ETA", "price")
    rows = [header]
    for cost in costs:
        mark = "≤ " if cost.bound else ""
        rows.append((cost.stage, f"{cost.backend}/{cost.model}", _count(cost.calls, mark), _count(cost.items, mark),
                     "?" if cost.input_chars is None else f"{cost.input_chars:,}",
                     "?" if cost.input_tokens is None else f"≈ {cost.input_tokens:,}",
                     "" if cost.eta_s is None else f"≈ {_duration(cost.eta_s)}",
                     price_text(cost, prices) + (f" [{cost.state}]" if cost.state == "cached" else "")))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    lines = [f"model calls still to make (counted without calling a model; {upstream}):"]
    for row in rows:
        lines.append("  " + "  ".join(cell.ljust(w) if i < 2 else cell.rjust(w)
                                      for i, (cell, w) in enumerate(zip(row, widths))) + "  " + row[-1])
    remote = [c for c in costs if not c.local and c.calls != 0]
    known = sum(c.calls for c in remote if c.calls is not None)
    bound = any(c.bound for c in remote)
    total = price_total(costs, prices)
    line = f"remote calls: {'≤ ' if bound else ''}{known:,}"
    if any(c.calls is None for c in remote):
        line += " and more not counted yet"
    if remote:
        line += "; price " + (f"≤ ${total:.4f} (input estimated, output at max_output_tokens per call)"
                              if total is not None
                              else "not known (see the stages above)")
        line += "; ETA at the rate the stage's last run measured (while calls run, the [calls] lines give it)"
    for cost in costs:
        if cost.note and cost.calls != 0:
            lines.append(f"  {cost.stage}: {cost.note}")
    return lines + [line]


def _count(value: int | None, mark: str) -> str:
    return "?" if value is None else f"{mark}{value:,}"


def _duration(seconds: float) -> str:
    """``42 s``, ``7 min``, ``3.5 h``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def run_rate(calls: int, started_at: str | None, finished_at: str | None) -> float | None:
    """Calls a second of a run that made ``calls`` calls between two ISO times (``None`` when unknown)."""
    from datetime import datetime

    if not calls or not started_at or not finished_at:
        return None
    seconds = (datetime.fromisoformat(finished_at) - datetime.fromisoformat(started_at)).total_seconds()
    return calls / seconds if seconds > 0 else None


def summaries_rate(engine, backend: str = "openai") -> float | None:
    """The calls a second of the last summaries run of ``backend`` that made any (``summary_runs``)."""
    from sqlalchemy import select

    from pmrag.core.store import summary_runs

    c = summary_runs.c
    with engine.connect() as conn:
        row = conn.execute(select(c.started_at, c.finished_at, c.n_ok, c.n_error)
                           .where(c.backend == backend, c.finished_at.is_not(None), (c.n_ok + c.n_error) > 0)
                           .order_by(c.started_at.desc()).limit(1)).first()
    return None if row is None else run_rate(row.n_ok + row.n_error, row.started_at, row.finished_at)


def step_rate(engine, step: str) -> float | None:
    """The calls a second of a step's last run in ``graph_extractions`` (its rows' first to last commit)."""
    from sqlalchemy import func, select

    from pmrag.core.store import graph_extractions

    c = graph_extractions.c
    with engine.connect() as conn:
        last = conn.execute(select(c.run_id).where(c.step == step).order_by(c.created_at.desc()).limit(1)).scalar()
        if last is None:
            return None
        row = conn.execute(select(func.count(), func.min(c.created_at), func.max(c.created_at))
                           .where(c.step == step, c.run_id == last)).one()
    return run_rate(row[0] - 1, row[1], row[2])   # n commits span n − 1 calls' time


def proposal_cost(engine, params, limit: int | None = None) -> StageCost:
    """``pmrag candidates --propose``'s calls (000 §4.2; :mod:`pmrag.annotate.propose`): one per message batch of
    the store (the first ``limit``) without an ``ok`` row for this model, these prompts and this input, the rule
    a proposal run resumes by."""
    from pmrag.annotate.propose import STEP, load_proposal_prompts, proposal_batches, proposal_items
    from pmrag.represent.llm import ExtractionStore

    llm = params.candidates.llm(params.summarizer)
    prompts = load_proposal_prompts(params.representations.prompts)
    _, chosen = proposal_batches(engine, params.candidates, limit)
    items = [(item.item_id, item.text) for item in proposal_items(chosen, params.candidates)]
    return llm_cost(STEP, items, ExtractionStore(engine).done(STEP, llm.model, prompts), model=llm.model,
                    prompts=prompts, max_output_tokens=llm.max_output_tokens, rate_per_s=step_rate(engine, STEP))


# --------------------------------------------------------------------------------------------- a study

MODEL_STAGES = ("summaries", "vectors", "subvectors", "query_vectors", "decomposition", "graph",
                "interest_relevance", "graph_evaluation", "answers")
"""The stages that call a model: an LLM, or the embedder (graph_evaluation embeds RAGv1's summary pieces)."""
NO_MODEL_UPSTREAM = ("synthetic", "ingest", "chunks", "qrels")
UPSTREAM_ORDER = (*NO_MODEL_UPSTREAM, "summaries", "representations")


@dataclass(frozen=True)
class StudyCosts:
    """Every model stage's :class:`StageCost`, in the study's order, and where their inputs came from."""

    costs: tuple[StageCost, ...]
    upstream: str

    def remote_calls(self) -> int:
        """The remote calls counted (an unknown count as none)."""
        return sum(c.calls or 0 for c in self.costs if not c.local)

    def lines(self, prices: Mapping[str, ModelPrice]) -> list[str]:
        return cost_lines(self.costs, prices, self.upstream)


def study_costs(study, *, compute: bool = False, stages: Sequence[str] | None = None) -> StudyCosts:
    """The calls each model stage of ``study`` (a :class:`~pmrag.study.facade.Study`) still has to make.

    ``compute``: compute the upstream stages that call no model (ingest, chunks, qrels) when they are not cached;
    otherwise (``pmrag status``) only cached ones are read, computing nothing.  With ``compute`` the
    representations are built too once the summaries are cached.  ``stages``: only these (``name`` or
    ``name:item``).  A text two stages would embed is counted once, in the first (the second finds it cached).
    """
    reader = _Inputs(study, compute)
    wanted = [key for key in study.engine.stages if key.name in MODEL_STAGES
              and (stages is None or str(key) in stages)]
    states = {row.name: row.state for row in study.engine.status()} if wanted else {}
    costs = []
    for key in wanted:
        state = states.get(str(key), "")
        for cost in _stage_costs(study, key, reader, cached=state == "cached"):
            if state == "cached":
                cost = replace(cost, calls=0, items=0, input_chars=0, input_tokens=0, bound=False, note="")
            costs.append(replace(cost, state=state))
    return StudyCosts(tuple(costs), reader.describe())


class _Inputs:
    """The upstream results the counts read: cached ones, or, when ``compute``, the ones that call no model
    computed, and the representations once the summaries are cached.  Records which (:meth:`describe`), and the
    embedding cache keys the stages counted so far will fill (``planned``)."""

    def __init__(self, study, compute: bool):
        self.study, self.compute = study, compute
        self.how: dict[str, str] = {}
        self.values: dict[str, object] = {}
        self.planned: set[str] = set()

    def get(self, name: str):
        if name not in self.how and self.compute and name in NO_MODEL_UPSTREAM:
            for earlier in NO_MODEL_UPSTREAM[:NO_MODEL_UPSTREAM.index(name)]:   # said as computed, if they are
                if StageKey(earlier) in self.study.engine.stages:
                    self.get(earlier)
        if name not in self.how:
            found, value = self.study.engine.peek(name)   # nothing loaded into the memo, nothing logged
            if found:
                self.how[name], self.values[name] = "read from the cache", value
            elif self.compute and (name in NO_MODEL_UPSTREAM or (
                    name == "representations" and self.get("summaries") is not None)):
                self.how[name], self.values[name] = "computed (no model call)", self.study.get(name)
            else:
                self.how[name], self.values[name] = "not available", None
        return self.values[name]

    def describe(self) -> str:
        groups: dict[str, list[str]] = {}
        for name in sorted(self.how, key=lambda n: UPSTREAM_ORDER.index(n) if n in UPSTREAM_ORDER else 99):
            groups.setdefault(self.how[name], []).append(name)
        return "; ".join(f"{', '.join(names)}: {how}" for how, names in groups.items()) or "no input read"


def _stage_costs(study, key: StageKey, inputs: _Inputs, cached: bool) -> list[StageCost]:
    """The rows of one model stage (a cached stage reads none of its inputs: it calls nothing)."""
    params = study.params
    name = str(key)
    embedding = params.embedding
    if cached:
        judged = key.name == "answers" and params.answers.judge != "none"
        return [StageCost(name, *stage_model(params, key.name), 0, 0, 0, 0),
                *([StageCost(f"{name} (judge)", "openai", judge_model(params), 0, 0, 0, 0)] if judged else [])]
    chunks = inputs.get("chunks")
    if key.name == "summaries":
        return [_summaries(study, chunks.chunks if chunks is not None else None, name)]
    if key.name in ("vectors", "subvectors"):
        return [_passages(study, key, inputs, chunks)]
    if key.name == "query_vectors":
        ingested = inputs.get("ingest")
        if ingested is None:
            return [bound_cost(name, embedding.backend, embedding.resolved_query_model, None, None,
                               "unknown until the questions are ingested")]
        return [_embedding(study, inputs, name, ingested.questions["text"].tolist(), "query")]
    if key.name == "decomposition":
        return [_decomposition(study, name, inputs.get("qrels")), *_later_vectors(
            params, f"{name} (sub-query vectors)", "query", "unknown until the questions are decomposed")]
    if key.name == "graph":
        return [_graph(study, name, chunks), *_later_vectors(
            params, f"{name} (interest label vectors)", "passage", "unknown until the interests are extracted")]
    if key.name == "interest_relevance":
        return [_relevance(study, name, inputs.get("qrels"))]
    if key.name == "answers":
        return [_answers(study, name, inputs), *_answer_judge(study, f"{name} (judge)", inputs)]
    return [_pieces(study, name, inputs)]


def stage_model(params, stage: str) -> tuple[str, str]:
    """``(backend, model)`` a model stage calls (a stand-in's model is ``offline`` / ``extractive-v1``)."""
    embedding, llm = params.embedding, params.summarizer
    if stage in ("vectors", "subvectors", "graph_evaluation"):
        return embedding.backend, embedding.resolved_model
    if stage == "query_vectors":
        return embedding.backend, embedding.resolved_query_model
    if stage == "summaries":
        return llm.backend, llm.model if llm.backend == "openai" else "extractive-v1"
    if stage == "answers":
        from pmrag.evaluate.answers import STAND_IN_MODEL

        backend = params.answers.backend
        return backend, llm.model if backend == "openai" else STAND_IN_MODEL
    backend = {"decomposition": params.decomposition.backend, "graph": params.graph.extractor,
               "interest_relevance": params.graph.relevance}[stage]
    return backend, llm.model if backend == "openai" else "offline"


def judge_model(params) -> str:
    """The model the answer judge calls: ``answers.judge_model``, else the summarizer's."""
    return params.answers.judge_model or params.summarizer.model


def _later_vectors(params, name: str, kind: str, note: str) -> list[StageCost]:
    """A stage's embeddings of texts a step of its own makes first: unknown, listed when they are remote."""
    embedding = params.embedding
    if embedding.backend not in REMOTE_BACKENDS:
        return []
    model = embedding.resolved_query_model if kind == "query" else embedding.resolved_model
    return [bound_cost(name, embedding.backend, model, None, None, note)]


def _summaries(study, chunks, name: str) -> StageCost:
    from sqlalchemy import select

    from pmrag.core.store import summaries
    from pmrag.represent.summarize import load_prompts

    section = study.params.summarizer
    if chunks is None:
        return bound_cost(name, section.backend, section.model, None, None, "unknown until the chunks are computed")
    engine = study.engine
    record = engine.record(name)
    resumes = record is not None and record["key"] == engine.key(name)
    with study.store.connect() as conn:
        ok = [row.chunk_id for row in conn.execute(select(summaries.c.chunk_id).where(summaries.c.status == "ok"))]
    prompts = load_prompts(study.params.representations.prompts) if section.backend == "openai" else None
    cost = summary_cost(list(zip(chunks["chunk_id"], chunks["raw_text"])), ok, section, prompts, resumes=resumes,
                        stage=name)
    return replace(cost, rate_per_s=summaries_rate(study.store)) if section.backend == "openai" else cost


def _embedding(study, inputs: _Inputs, name: str, texts: Sequence[str], kind: str) -> StageCost:
    """:func:`embedding_cost` of ``texts`` (as sent) against the study's embedding cache and the keys earlier
    stages will fill."""
    from pathlib import Path

    section = study.params.embedding
    if section.backend == HASHED_STAND_IN:   # never cached: each stage computes its texts again, none looked up
        return embedding_cost(name, texts, kind, section, ())
    path = Path(study.params.cache_dir) / "embeddings.sqlite"
    cached: set[str] = set()
    if path.is_file():
        with EmbeddingCache(path) as cache:
            cached = cached_embedding_keys(cache, texts, kind, section)
    cost = embedding_cost(name, texts, kind, section, cached | inputs.planned)
    model_id = embedder_model_id(section)
    inputs.planned.update(cache_key(model_id, kind, t) for t in texts)
    return cost


def _passages(study, key: StageKey, inputs: _Inputs, chunks) -> StageCost:
    from pmrag.represent.subwindows import subwindow_texts

    section, name = study.params.embedding, str(key)
    representation = key.item
    texts = None
    representations = inputs.get("representations")
    if representations is not None:
        texts = representation_texts(representations, representation)
    elif representation in SUMMARY_FREE and chunks is not None:
        texts = representation_texts(representations_without_summaries(study, chunks.chunks), representation)
    if texts is None:   # texts made from the summaries, which are not made yet
        if chunks is None or key.name == "subvectors":
            return bound_cost(name, section.backend, section.resolved_model, None, None,
                              "unknown until the " + ("chunks are computed" if chunks is None else "summaries are made"))
        n = len(chunks.chunks)
        return bound_cost(name, section.backend, section.resolved_model, math.ceil(n / section.batch_size), n,
                          "at most a text per chunk, known once the representations are built from the summaries")
    if key.name == "subvectors":
        multivector = study.params.multivector
        texts = subwindow_texts(texts, multivector.window_lines, multivector.stride_lines)[1]
    return _embedding(study, inputs, name, passage_texts_sent(texts, section), "passage")


SUMMARY_FREE = ("raw_text", "prefix", "excerpt")
"""The representations whose text does not depend on the summaries (:mod:`pmrag.represent.representations`)."""


def representations_without_summaries(study, chunks):
    """The representations built with no summary at all: right for :data:`SUMMARY_FREE` ones (the stage builds
    the same texts once the summaries exist)."""
    import pandas as pd

    from pmrag.represent.representations import EmbeddingTextTemplate, build_representations

    section = study.params.representations
    template = EmbeddingTextTemplate.from_prompts(section.prompts, section.excerpt_chars)
    return build_representations(chunks, pd.DataFrame(columns=["chunk_id", "summary", "status"]), template)


def _pieces(study, name: str, inputs: _Inputs) -> StageCost:
    """graph_evaluation: RAGv1's summary pieces, embedded as they are (no shortening)."""
    from pmrag.evaluate.graph_eval import summary_pieces

    section, embedding = study.params.graph, study.params.embedding
    summaries = inputs.get("summaries")
    if summaries is None:
        return bound_cost(name, embedding.backend, embedding.resolved_model, None, None,
                          "RAGv1's summary pieces: unknown until the summaries are made")
    pieces = summary_pieces(summaries[summaries["status"] == "ok"], section.piece_chars, section.piece_overlap)
    return _embedding(study, inputs, name, pieces["text"].tolist(), "passage")


def _decomposition(study, name: str, qrels) -> StageCost:
    from pmrag.represent.llm import ExtractionStore
    from pmrag.retrieve.subqueries import (DECOMPOSITION, decomposition_input, decomposition_item_id,
                                           load_decomposition_prompts)

    section, llm = study.params.decomposition, study.params.summarizer
    if section.backend != "openai":
        return StageCost(name, section.backend, "offline", 0, None if qrels is None else len(qrels.questions), None, None)
    if qrels is None:
        return bound_cost(name, "openai", llm.model, None, None, "unknown until the questions are ingested")
    questions = qrels.questions
    prompts = load_decomposition_prompts(study.params.representations.prompts)
    items = [(decomposition_item_id(q, text, section.max_subqueries), decomposition_input(text, section.max_subqueries))
             for q, text in zip(questions["question_id"].astype(str), questions["text"])]
    done = ExtractionStore(study.store).done(DECOMPOSITION.name, llm.model, prompts)
    return replace(llm_cost(name, items, done, model=llm.model, prompts=prompts, max_output_tokens=llm.max_output_tokens),
                   rate_per_s=step_rate(study.store, DECOMPOSITION.name))


def _graph(study, name: str, chunks) -> StageCost:
    from pmrag.represent.extract_llm import INTEREST_MAX_OUTPUT_TOKENS, SEMANTIC, load_graph_prompts
    from pmrag.represent.llm import ExtractionStore

    section, llm = study.params.graph, study.params.summarizer
    if section.extractor != "openai":
        return StageCost(name, section.extractor, "offline", 0, None if chunks is None else len(chunks.chunks), None, None)
    if chunks is None:
        return bound_cost(name, "openai", llm.model, None, None, "unknown until the chunks are computed")
    ordered = chunks.chunks.sort_values("chunk_id")
    items = [(chunk_id, raw_text[: llm.max_input_chars]) for chunk_id, raw_text in
             zip(ordered["chunk_id"], ordered["raw_text"])]
    prompts = load_graph_prompts(study.params.representations.prompts)[SEMANTIC.name]
    semantic = llm_cost(name, items, ExtractionStore(study.store).done(SEMANTIC.name, llm.model, prompts),
                        model=llm.model, prompts=prompts, max_output_tokens=llm.max_output_tokens,
                        rate_per_s=step_rate(study.store, SEMANTIC.name))
    if not semantic.calls:
        return semantic   # the interest calls' inputs are the semantic replies: resumed from the store as well
    batches = math.ceil(len(items) / section.interest_batch)
    return replace(semantic, calls=semantic.calls + batches, items=semantic.items + batches, bound=True,
                   max_output_tokens=max(llm.max_output_tokens, INTEREST_MAX_OUTPUT_TOKENS),
                   note=f"{semantic.calls} semantic calls (counted) and ≤ {batches} interest calls over "
                        f"{section.interest_batch} memories each, whose input (the semantic replies) is not counted")


def _relevance(study, name: str, qrels) -> StageCost:
    section, llm = study.params.graph, study.params.summarizer
    n = None if qrels is None else len(qrels.questions)
    if section.relevance != "openai":
        return StageCost(name, section.relevance, "offline", 0, n, None, None)
    return bound_cost(name, "openai", llm.model, n, n, "one call per question, its input known once the graph's "
                      "interests exist (a rerun resumes the ones answered)", llm.max_output_tokens)


def _answers(study, name: str, inputs: _Inputs) -> StageCost:
    """answers: one call per retriever × held-out question without an ok row, counted exactly once the graph
    evaluation and the selected hybrid are cached (their contexts are then known), else bounded by every
    evaluable question."""
    from pmrag.evaluate.answers import ANSWERS, STAND_IN_MODEL, load_answer_prompts, step_items, study_jobs
    from pmrag.represent.llm import ExtractionStore

    section, llm = study.params.answers, study.params.summarizer
    qrels = inputs.get("qrels")
    upstream = {stage: inputs.get(stage) for stage in ("chunks", "summaries", "graph", "graph_evaluation", "hybrids")}
    if qrels is None or any(value is None for value in upstream.values()):
        n = None if qrels is None else len(qrels.questions) * len(section.retrievers)
        if section.backend != "openai":
            return StageCost(name, section.backend, STAND_IN_MODEL, 0, n, None, None)
        return bound_cost(name, "openai", llm.model, n, n, "at most one call per retriever × evaluable question; "
                          "counted once the graph evaluation is cached", llm.max_output_tokens)
    _, _, jobs = study_jobs(qrels.questions, upstream["chunks"].chunks, upstream["summaries"], upstream["graph"],
                            upstream["graph_evaluation"], upstream["hybrids"].selected, section=section,
                            reference=study.params.analysis.reference_retriever)
    if section.backend != "openai":
        return StageCost(name, section.backend, STAND_IN_MODEL, 0, len(jobs), None, None)
    items = [(item.item_id, item.text) for item in step_items(jobs)]
    prompts = load_answer_prompts(study.params.representations.prompts)
    done = ExtractionStore(study.store).done(ANSWERS.name, llm.model, prompts)
    return replace(llm_cost(name, items, done, model=llm.model, prompts=prompts, max_output_tokens=llm.max_output_tokens),
                   rate_per_s=step_rate(study.store, ANSWERS.name))


def _answer_judge(study, name: str, inputs: _Inputs) -> list[StageCost]:
    """The answer judge (``answers.judge: openai``): one call per distinct judged answer without an ok row,
    counted exactly when every answer is known (the stand-in's, computed here; the model's, read from the store's
    ok rows), else bounded by the judged questions × retrievers; nothing when there is no judge."""
    from pmrag.evaluate.answer_judge import ANSWER_JUDGE, judge_jobs, judge_llm, judged_questions, load_judge_prompts
    from pmrag.represent.llm import ExtractionStore

    section = study.params.answers
    if section.judge == "none":
        return []
    llm = judge_llm(section, study.params.summarizer)
    qrels = inputs.get("qrels")
    known = _known_answers(study, inputs)
    if known is None:
        n = None if qrels is None else len(judged_questions(qrels.questions)) * len(section.retrievers)
        return [bound_cost(name, "openai", llm.model, n, n, "at most one call per retriever × question with a gold "
                           "answer; counted once the answers are known", llm.max_output_tokens)]
    asked, answers = known
    items = [(item.item_id, item.text) for item in judge_jobs(answers, asked).items]
    prompts = load_judge_prompts(study.params.representations.prompts)
    done = ExtractionStore(study.store).done(ANSWER_JUDGE.name, llm.model, prompts)
    return [replace(llm_cost(name, items, done, model=llm.model, prompts=prompts,
                             max_output_tokens=llm.max_output_tokens),
                    rate_per_s=step_rate(study.store, ANSWER_JUDGE.name))]


def _known_answers(study, inputs: _Inputs):
    """``(questions asked, answers)`` when every answer of the answers stage is known without a call (None
    otherwise; :func:`~pmrag.evaluate.answers.known_answers`)."""
    from pmrag.evaluate.answers import ANSWERS, answer_llm, known_answers, load_answer_prompts, study_jobs
    from pmrag.represent.llm import ExtractionStore

    section, qrels = study.params.answers, inputs.get("qrels")
    upstream = {stage: inputs.get(stage) for stage in ("chunks", "summaries", "graph", "graph_evaluation", "hybrids")}
    if qrels is None or any(value is None for value in upstream.values()):
        return None
    asked, _, jobs = study_jobs(qrels.questions, upstream["chunks"].chunks, upstream["summaries"], upstream["graph"],
                                upstream["graph_evaluation"], upstream["hybrids"].selected, section=section,
                                reference=study.params.analysis.reference_retriever)
    stored = None if section.backend != "openai" else ExtractionStore(study.store).done(
        ANSWERS.name, answer_llm(section, study.params.summarizer).model,
        load_answer_prompts(study.params.representations.prompts))
    answers = known_answers(jobs, stored)
    return None if answers is None else (asked, answers)
