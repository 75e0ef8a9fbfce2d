"""TOBUGraph's extraction (paper 002 §2.2–2.3): semantic details per memory, then interests across memories.

One interface, :class:`Extractor`, in the paper's two steps, so that an LLM backend fits as the paper runs it:

* ``extract(memories)`` → one :class:`MemorySemantics` per memory (§2.2, the Semantic Extraction Module): the
  summary and the participants (given: the chunk's summary text, its speakers), the time span (given), and
  what the backend extracts: named things, activities, key phrases, sentiment.
* ``interests(semantics)`` → :class:`Interest` values (§2.3, the Relation Extraction Module): themes shared
  across memories, each with every memory it concerns.

Backends are registered in :data:`EXTRACTORS` under the params' ``graph.extractor`` name and built by
:func:`make_extractor`: ``offline`` (below) and ``openai`` (the paper's method, :mod:`pmrag.represent.extract_llm`).

The offline backend (:class:`OfflineExtractor`) is a stand-in with no model, and says so in its
:meth:`~OfflineExtractor.label`.  Its rules:

* **Text.** Each ``YYYY-MM-DD HH:MM speaker: text`` line of the memory's raw text without its header (the
  speaker matched against the memory's own speakers first, so a name holding ``": "`` is cut right; a line
  without a header continues a message and is read as it is); URLs and bracketed placeholders
  (``[写真]``, ``[Photo]``) removed.  A line holding Hiragana, Katakana or Kanji takes the Japanese path, any
  other line the English path.
* **Japanese** (SudachiPy with its core dictionary: one tokenizer per extractor, ``split_mode`` A/B/C): nouns
  by part of speech, each under its normalised form (かふぇ → カフェ).  Proper nouns: 人名 → ``person``,
  地名 → ``place``, any other → ``named`` (the dictionary does not tell organisations, objects and events
  apart); consecutive proper nouns are one name (佐藤 花子 → 佐藤花子).  Common nouns that take する
  (サ変可能) → ``activity``; other general common nouns (普通名詞 一般) → ``thing``.  Numerals, pronouns,
  counters and adverb-like nouns (今日, ことし) are no phrase, nor is a one-character term or one of
  :data:`JA_STOP_TERMS`.
* **English**: word tokens, lower-cased, of three letters or more, not in :func:`english_stop_words`
  (scikit-learn's English stop words and chat words), without a possessive ``'s``, and not read as a past
  tense (five letters or more ending in "ed" but not "eed": talked); one ending in "ing" is an ``activity``,
  any other a ``thing``.  A run of capitalised words (not stop words) is a ``named`` thing
  under its own spelling, except a single capitalised word opening a sentence ("Congratulations!"), which
  is read as an ordinary word.
* **Semantic details** of a memory: every named thing, and its ``max_phrases`` most frequent key phrases
  (activities and things; ties by label).  Sentiment is left out: no offline rule would label it honestly.
* **Interests** (:func:`interest_candidates`), under ``interest_rule``: ``per_memory`` (002 §2.3, the default)
  takes each memory's own interests, its semantic details (named things and key phrases), and links each to
  every memory whose text holds it, so an interest may hold one memory; a memory without such a detail takes
  its participants (a person interest linked only to such memories), so every memory with a speaker is
  reachable; ``recurring`` takes only a term found in at least ``min_memories`` memories, the
  ``max_interests`` most shared.  Either way a participant's own name is no interest (in a two-person chat the
  other person would join every memory; a name typed in the text of a memory the person is not speaking in
  still counts).  The candidates (most shared first, ties by label) are embedded by the injected ``embedder`` (texts → float32 matrix; the study
  passes e5, :func:`char_ngram_vectors` is a model-free one) and merged by scikit-learn's
  ``AgglomerativeClustering(metric="cosine", linkage="average", distance_threshold=merge_distance)``:
  candidates closer than ``merge_distance`` are one interest, labelled by its most shared member (ties: the
  shorter, then by code point), of that member's kind, linked to the union of its members' memories.
  Interests come most shared first (ties by label).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache, lru_cache
from typing import Protocol

import numpy as np
from sqlalchemy import Engine

from pmrag.core.errors import PmragError
from pmrag.core.params import GraphSection, SummarizerSection
from pmrag.core.registry import Registry

Embedder = Callable[[list[str]], np.ndarray]
"""Phrases → one float32 row each (the study's e5 embedder with its cache, or :func:`char_ngram_vectors`)."""

NAMED_KINDS = ("person", "place", "named")
PHRASE_KINDS = ("activity", "thing")
TERM_KINDS = NAMED_KINDS + PHRASE_KINDS


class GraphError(PmragError):
    """A memory graph or its inputs break a rule (an edge of another kind, a duplicate memory, ...)."""


# --------------------------------------------------------------------------------------------- values

@dataclass(frozen=True)
class Memory:
    """One memory node's input: an id, its raw text (``YYYY-MM-DD HH:MM speaker: text`` lines), its first and
    last message times and its speakers in order of first appearance; the summary when one exists.

    A chunk is one memory (``graph.memory_unit: chunk``); a session would be another.
    """

    memory_id: str
    text: str
    start_at: datetime
    end_at: datetime
    speakers: tuple[str, ...]
    summary: str | None = None


@dataclass(frozen=True)
class Term:
    """A phrase or named thing found in a memory: its kind (:data:`TERM_KINDS`), label and occurrences."""

    kind: str
    label: str
    count: int


@dataclass(frozen=True)
class MemorySemantics:
    """What one memory's semantic nodes say (§2.2).  ``entities`` and ``phrases`` become semantic nodes;
    ``terms`` (everything found, most frequent first) is what an offline backend counts interests on."""

    memory_id: str
    summary: str | None
    participants: tuple[str, ...]
    start_at: datetime
    end_at: datetime
    entities: tuple[Term, ...]
    phrases: tuple[Term, ...]
    terms: tuple[Term, ...] = ()
    sentiment: str | None = None


@dataclass(frozen=True)
class Interest:
    """A theme shared across memories (§2.3): its label, kind, every memory it concerns (sorted) and the
    surface forms merged into it (the label first)."""

    label: str
    kind: str
    memory_ids: tuple[str, ...]
    aliases: tuple[str, ...]


class Extractor(Protocol):
    """A graph extractor backend: per-memory extraction, then interests across memories."""

    backend: str

    def label(self) -> str: ...

    def provenance(self) -> dict: ...

    def extract(self, memories: Sequence[Memory]) -> list[MemorySemantics]: ...

    def interests(self, semantics: Sequence[MemorySemantics]) -> list[Interest]: ...


EXTRACTORS: Registry[Callable[..., Extractor]] = Registry("graph extractor")


def make_extractor(params: GraphSection, *, embedder: Embedder, llm: SummarizerSection | None = None,
                   prompts: str = "ja", allow_remote: bool = False, proxy: str | None = None,
                   engine: Engine | None = None, progress: bool = False) -> Extractor:
    """The backend ``params.extractor`` names, with ``embedder`` for the phrase vectors of interest merging.

    Parameters
    ----------
    params: the params' ``graph`` section.
    embedder: texts → float32 rows (interest merging, both backends).
    llm: the params' ``summarizer`` section: the openai backend's model and connection (ignored offline).
    prompts: the params' ``representations.prompts`` (``ja``, ``en`` or a folder), for the openai backend's prompts.
    allow_remote, proxy: the params' top-level keys, as the summarizer takes them.
    engine: the study store, where the openai backend records each call (``graph_extractions``) and resumes.
    progress: show progress bars (the offline backend's over the memories, the openai backend's over its calls).

    Returns
    -------
    An :class:`Extractor`.  The openai backend refuses (:class:`GraphError`) without ``llm`` or ``engine``, and a
    server off this machine without ``allow_remote`` (:class:`~pmrag.represent.privacy.RemoteNotAllowed`).
    """
    return EXTRACTORS.get(params.extractor)(params, embedder=embedder, llm=llm, prompts=prompts,
                                            allow_remote=allow_remote, proxy=proxy, engine=engine, progress=progress)


# --------------------------------------------------------------------------------------------- text

_HEADER_RE = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2} ")
_NOISE_RE = re.compile(r"https?://\S+|\[[^\]\n]{1,20}\]")
_JAPANESE_RE = re.compile(r"[\u3041-\u3096\u30a1-\u30fa\u30fc\u3005\u4e00-\u9fff]")


def message_texts(text: str, speakers: Sequence[str] = ()) -> list[str]:
    """The lines of a raw text without their ``YYYY-MM-DD HH:MM speaker: `` headers, URLs and placeholders.

    The speaker is matched against ``speakers`` first (longest first), else cut at the first ``": "``; a line
    without a header (a message's continuation) is kept as it is.  Empty lines are dropped.
    """
    names = sorted(speakers, key=len, reverse=True)
    out = []
    for line in text.split("\n"):
        header = _HEADER_RE.match(line)
        if header:
            rest = line[header.end():]
            for name in names:
                if rest.startswith(name + ": "):
                    rest = rest[len(name) + 2:]
                    break
            else:
                cut = rest.find(": ")
                rest = rest[cut + 2:] if cut >= 0 else rest
            line = rest
        line = _NOISE_RE.sub(" ", line).strip()
        if line:
            out.append(line)
    return out


def is_japanese(text: str) -> bool:
    """True when ``text`` holds a Hiragana, Katakana or Kanji character (the Japanese path)."""
    return _JAPANESE_RE.search(text) is not None


JA_STOP_TERMS = frozenset({
    "こと", "もの", "感じ", "本当", "大丈夫", "自分", "一緒", "時間", "普通", "全然", "了解", "写真", "スタンプ", "動画",
    "メッセージ", "ファイル", "よう", "ところ", "わけ", "はず", "ため", "人", "方", "気", "話", "件", "前", "後", "中",
    "感謝", "お願い", "失礼", "連絡", "返信", "確認", "予定", "準備", "用事", "場合", "ごめん", "ありがとう", "笑い",
    "今週末", "週明け", "週末", "来週", "今週", "先週", "来月", "今月", "先月", "今朝", "今夜", "明日", "昨日", "明後日",
    "一昨日", "午前", "午後", "夕方", "夜中", "昼間", "来週末", "因み",
})
"""Common nouns of chat that name no theme, and times (the memory's time span is its own semantic node): the
offline Japanese path drops them, in any spelling with the same normalised form (ごめん and 御免)."""


@cache
def english_stop_words() -> frozenset[str]:
    """scikit-learn's English stop words and words of chat that name no theme (the offline English path); made
    on first use, so importing this module does not import scikit-learn."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    chat = {
        "yeah", "yes", "yep", "nope", "okay", "lol", "haha", "hahaha", "hey", "hello", "thanks", "thank", "sure", "cool",
        "nice", "great", "good", "awesome", "amazing", "wow", "really", "just", "like", "know", "think", "got", "get",
        "gonna", "wanna", "lot", "lots", "things", "thing", "something", "anything", "everything", "nothing", "morning",
        "evening", "during", "being", "going", "doing", "getting", "having", "making", "saying", "feeling", "looking",
        "thinking", "bring", "king", "sounds", "glad", "love", "time", "times", "today", "tomorrow", "yesterday",
        "day", "days", "week", "weeks", "year", "years", "want", "need", "make", "made", "way", "did", "does", "let",
        "right", "totally", "definitely", "maybe", "pretty", "actually", "probably", "absolutely", "exactly", "sorry",
        "please", "congrats", "congratulations", "new", "old", "big", "little", "feel", "felt", "tell", "told",
        "went", "come", "came", "comes", "coming", "see", "saw", "seen", "say", "said", "says", "take", "took", "taken",
        "loves", "loved", "liked", "likes", "wanted", "wants", "thought", "knew", "gets", "goes",
        "gone", "use", "used", "try", "tried", "trying", "keep", "kept", "near", "far", "sometimes", "always", "also",
        "still", "ago", "soon", "later", "lately", "recently", "tonight", "weekend", "hope", "hopefully", "happy",
    }
    return frozenset(ENGLISH_STOP_WORDS) | frozenset(chat)


_EN_WORD_RE = re.compile(r"[^\W\d_](?:[\w'’\-]*[^\W_])?")
_SENTENCE_END = ".!?\"“(\n"


def english_terms(text: str) -> list[tuple[str, str]]:
    """``(kind, label)`` of each term of an English line, in order (see the module docstring's rules)."""
    stop_words = english_stop_words()
    words = list(_EN_WORD_RE.finditer(text))
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(words):
        word = _no_possessive(words[i][0])
        capitalised = word[:1].isupper() and word.lower() not in stop_words
        if capitalised:
            j = i + 1
            while (j < len(words) and text[words[j - 1].end():words[j].start()] == " "
                   and words[j][0][:1].isupper() and _no_possessive(words[j][0]).lower() not in stop_words):
                j += 1
            before = text[:words[i].start()].rstrip()
            opens_sentence = not before or before[-1] in _SENTENCE_END
            if j - i > 1 or not opens_sentence:
                out.append(("named", " ".join(_no_possessive(w[0]) for w in words[i:j])))
                i = j
                continue
        lower = word.lower()
        if (len(lower) >= 3 and lower not in stop_words and "'" not in lower and "’" not in lower
                and not _past_tense(lower)):
            out.append(("activity" if lower.endswith("ing") and len(lower) >= 5 else "thing", lower))
        i += 1
    return out


def _fold_sentence_initial_names(counts: Counter[tuple[str, str]]) -> None:
    """In one memory, a word read in lower case at a sentence's start ("Caroline's dog ...": ``caroline``)
    counts as the name it is where the memory also writes it capitalised mid-sentence (``Caroline``)."""
    names = {label.lower(): label for kind, label in counts if kind == "named" and " " not in label}
    for key in [key for key in counts if key[0] in PHRASE_KINDS and key[1] in names]:
        counts[("named", names[key[1]])] += counts.pop(key)


def _past_tense(word: str) -> bool:
    """Read as a verb's past tense, no phrase: five letters or more ending in "ed" but not "eed" (talked)."""
    return len(word) >= 5 and word.endswith("ed") and not word.endswith("eed")


def _no_possessive(word: str) -> str:
    return word[:-2] if word.endswith(("'s", "’s")) else word


def _japanese_category(pos: tuple[str, ...]) -> str | None:
    """A SudachiPy part of speech → a term kind, or None for a morpheme that is no phrase."""
    if pos[0] != "名詞":
        return None
    if pos[1] == "固有名詞":
        return {"人名": "person", "地名": "place"}.get(pos[2], "named")
    if pos[1] == "普通名詞":
        if pos[2] in ("サ変可能", "サ変形状詞可能"):
            return "activity"
        if pos[2] == "一般":
            return "thing"
    return None


_LAUGHTER_RE = re.compile(r"[wWｗＷ]+")


def _keep_japanese(label: str, stop: frozenset[str]) -> bool:
    return (len(label) >= 2 and label not in stop and any(ch.isalpha() for ch in label)
            and not _LAUGHTER_RE.fullmatch(label))


@lru_cache(maxsize=1)
def sudachi_dictionary():
    """SudachiPy's core dictionary, loaded once per process (about 2 s the first time)."""
    from sudachipy import Dictionary

    return Dictionary(dict="core")


class JapaneseTerms:
    """SudachiPy (core dictionary) nouns of a line as ``(kind, label)``: the process's one dictionary, one
    tokenizer per object; part-of-speech ids mapped to kinds once each."""

    def __init__(self, split_mode: str = "C"):
        from sudachipy import SplitMode

        if split_mode not in ("A", "B", "C"):
            raise ValueError(f"split_mode must be A, B or C, got {split_mode!r}")
        self.split_mode = split_mode
        self._dictionary = sudachi_dictionary()
        self._tokenizer = self._dictionary.tokenizer(getattr(SplitMode, split_mode), fields={"pos", "normalized_form"})
        self._kinds: dict[int, str | None] = {}
        self._stop = frozenset(JA_STOP_TERMS | {m.normalized_form() for t in JA_STOP_TERMS
                                                for m in self._tokenizer.tokenize(t) if len(m.surface()) == len(t)})

    def _kind(self, pos_id: int) -> str | None:
        try:
            return self._kinds[pos_id]
        except KeyError:
            kind = self._kinds[pos_id] = _japanese_category(self._dictionary.pos_of(pos_id))
            return kind

    def morphemes(self, text: str) -> list[str]:
        """The surface forms SudachiPy cuts ``text`` into (what ``split_mode`` changes)."""
        return [m.surface() for m in self._tokenizer.tokenize(text)]

    def __call__(self, text: str) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        run: list[str] = []
        run_kinds: set[str] = set()

        def close_run():
            if run:
                label = "".join(run)
                if _keep_japanese(label, self._stop):
                    out.append((run_kinds.pop() if len(run_kinds) == 1 else "named", label))
                run.clear()
                run_kinds.clear()

        for morpheme in self._tokenizer.tokenize(text):
            kind = self._kind(morpheme.part_of_speech_id())
            if kind in NAMED_KINDS:
                run.append(morpheme.normalized_form())
                run_kinds.add(kind)
                continue
            close_run()
            if kind is not None:
                label = morpheme.normalized_form()
                if _keep_japanese(label, self._stop):
                    out.append((kind, label))
        close_run()
        return out


# --------------------------------------------------------------------------------------------- vectors

def char_ngram_vectors(texts: Sequence[str], ngram_range: tuple[int, int] = (1, 3)) -> np.ndarray:
    """A model-free phrase embedder: scikit-learn TF-IDF over character n-grams within word boundaries
    (``char_wb``), lower-cased, fitted on ``texts`` themselves; L2-normalised float32 rows, deterministic."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = list(texts)
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=ngram_range, lowercase=True)
    return vectorizer.fit_transform(texts).toarray().astype(np.float32)


def cluster_phrases(vectors: np.ndarray, merge_distance: float) -> list[list[int]]:
    """Groups of row indices whose average-linkage cosine distance stays below ``merge_distance``
    (``AgglomerativeClustering(metric="cosine", linkage="average", distance_threshold=merge_distance)``).

    Groups come in order of their first row, rows ascending within a group.  A zero row (no direction) is a
    group of its own; ``merge_distance`` 0 merges nothing.
    """
    vectors = np.asarray(vectors, dtype=np.float64)
    n = len(vectors)
    assignment = np.arange(n)
    usable = np.flatnonzero(np.linalg.norm(vectors, axis=1) > 0) if n else np.zeros(0, dtype=int)
    if merge_distance > 0 and len(usable) >= 2:
        from sklearn.cluster import AgglomerativeClustering

        model = AgglomerativeClustering(n_clusters=None, metric="cosine", linkage="average",
                                        distance_threshold=float(merge_distance))
        labels = model.fit_predict(vectors[usable])
        assignment[usable] = n + labels   # out of range of the row numbers that the singletons keep
    groups: dict[int, list[int]] = {}
    for row, group in enumerate(assignment.tolist()):
        groups.setdefault(group, []).append(row)
    return list(groups.values())


# --------------------------------------------------------------------------------------------- offline

def _check_unique(memory_ids: Sequence[str]) -> None:
    seen: set[str] = set()
    for memory_id in memory_ids:
        if memory_id in seen:
            raise GraphError(f"memory {memory_id!r} is given twice")
        seen.add(memory_id)


class OfflineExtractor:
    """The offline stand-in (module docstring): SudachiPy and English word rules per memory, interests by
    ``interest_rule`` (each memory's own, or recurrence across ``min_memories`` memories) merged by phrase-vector
    similarity.  Not an LLM."""

    backend = "offline"

    def __init__(self, params: GraphSection, *, embedder: Embedder, progress: bool = False):
        self.params = params
        self.embedder = embedder
        self.progress = progress
        self.japanese = JapaneseTerms(params.split_mode)

    def label(self) -> str:
        """E.g. "offline stand-in (SudachiPy + per-memory interests), not an LLM" (:meth:`GraphSection.label`)."""
        return self.params.label()

    def provenance(self) -> dict:
        from importlib.metadata import version

        return {"backend": self.backend, "label": self.label(), **self.params.model_dump(mode="json"),
                "sudachipy": version("sudachipy"), "sudachidict_core": version("sudachidict_core")}

    def line_terms(self, line: str) -> list[tuple[str, str]]:
        """``(kind, label)`` of each term of one message line, by its language's path."""
        return self.japanese(line) if is_japanese(line) else english_terms(line)

    def extract(self, memories: Sequence[Memory]) -> list[MemorySemantics]:
        _check_unique([m.memory_id for m in memories])
        from tqdm.auto import tqdm

        cache: dict[str, list[tuple[str, str]]] = {}   # a line repeated (window overlap, "了解") is cut once
        out = []
        for memory in tqdm(memories, desc="graph semantic (offline)", unit="memory", disable=not self.progress):
            counts: Counter[tuple[str, str]] = Counter()
            for line in message_texts(memory.text, memory.speakers):
                found = cache.get(line)
                if found is None:
                    found = cache[line] = self.line_terms(line)
                counts.update(found)
            _fold_sentence_initial_names(counts)
            terms = tuple(sorted((Term(kind, label, n) for (kind, label), n in counts.items()),
                                 key=lambda t: (-t.count, t.label, t.kind)))
            out.append(MemorySemantics(
                memory_id=memory.memory_id, summary=memory.summary, participants=tuple(memory.speakers),
                start_at=memory.start_at, end_at=memory.end_at,
                entities=tuple(t for t in terms if t.kind in NAMED_KINDS),
                phrases=tuple(t for t in terms if t.kind in PHRASE_KINDS)[: self.params.max_phrases],
                terms=terms,
            ))
        return out

    def interests(self, semantics: Sequence[MemorySemantics]) -> list[Interest]:
        _check_unique([s.memory_id for s in semantics])
        memories_of, kind_weight = _term_memories(semantics)
        if self.params.interest_rule == "per_memory":
            _participants_of_bare_memories(semantics, memories_of, kind_weight)
        candidates = interest_candidates(semantics, memories_of, self.params)
        if not candidates:
            return []
        vectors = np.asarray(self.embedder(list(candidates)), dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(candidates):
            raise GraphError(f"the phrase embedder returned shape {vectors.shape} for {len(candidates)} phrases")
        interests = []
        for group in cluster_phrases(vectors, self.params.merge_distance):
            members = sorted((candidates[i] for i in group), key=lambda label: (-len(memories_of[label]), len(label), label))
            head = members[0]
            kinds = kind_weight[head]
            kind = min(kinds, key=lambda k: (-kinds[k], TERM_KINDS.index(k)))
            ids = sorted({memory_id for label in members for memory_id in memories_of[label]})
            interests.append(Interest(label=head, kind=kind, memory_ids=tuple(ids), aliases=tuple(members)))
        return sorted(interests, key=lambda i: (-len(i.memory_ids), i.label))


def _term_memories(semantics: Sequence[MemorySemantics]) -> tuple[dict[str, list[str]], dict[str, Counter[str]]]:
    """Every term label (a participant's own name excepted) → the memories it occurs in, in input order, and
    its kinds weighted by occurrences."""
    memories_of: dict[str, list[str]] = defaultdict(list)
    kind_weight: dict[str, Counter[str]] = defaultdict(Counter)
    for memory in semantics:
        participants = set(memory.participants)
        labels = {}
        for term in memory.terms:
            if term.label in participants:
                continue
            kind_weight[term.label][term.kind] += term.count
            labels[term.label] = None
        for label in labels:
            memories_of[label].append(memory.memory_id)
    return memories_of, kind_weight


def _participants_of_bare_memories(semantics: Sequence[MemorySemantics], memories_of: dict[str, list[str]],
                                   kind_weight: dict[str, Counter[str]]) -> None:
    """A memory without a semantic detail of its own (a stamp, a one-line greeting) takes its participants as its
    interests (002 §2.3 counts people among the themes), each linked to the memories that take it so: a person
    interest made only of such memories, so the other person of a two-person chat does not join every memory."""
    for memory in semantics:
        participants = set(memory.participants)
        if any(t.label not in participants for t in (*memory.entities, *memory.phrases)):
            continue
        for name in memory.participants:
            memories_of[name].append(memory.memory_id)
            kind_weight[name]["person"] += 1


def interest_candidates(semantics: Sequence[MemorySemantics], memories_of: dict[str, list[str]],
                        params: GraphSection) -> list[str]:
    """The offline interest candidates under ``params.interest_rule``, most shared first (ties by label).

    ``per_memory`` (002 §2.3, each memory's interests): every memory's semantic details (its named things and
    key phrases), a participant's own name excepted, whatever their count, so a memory with one is reachable.
    ``recurring``: the labels of ``memories_of`` found in at least ``min_memories`` memories, the
    ``max_interests`` most shared.
    """
    if params.interest_rule == "per_memory":
        labels = {t.label for m in semantics for t in (*m.entities, *m.phrases) if t.label not in set(m.participants)}
        labels |= {name for m in semantics for name in m.participants
                   if not any(t.label not in set(m.participants) for t in (*m.entities, *m.phrases))}
    else:
        labels = {label for label, ids in memories_of.items() if len(ids) >= params.min_memories}
    ordered = sorted((label for label in labels if label in memories_of), key=lambda label: (-len(memories_of[label]), label))
    return ordered if params.interest_rule == "per_memory" else ordered[: params.max_interests]


@EXTRACTORS.register("offline")
def _offline(params: GraphSection, *, embedder: Embedder, progress: bool = False, **_connection) -> OfflineExtractor:
    """The offline stand-in; the connection arguments of :func:`make_extractor` are not its concern."""
    return OfflineExtractor(params, embedder=embedder, progress=progress)


# registers the LLM backend (pmrag.represent.extract_llm): it imports this module's values
from pmrag.represent import extract_llm  # noqa: E402,F401
