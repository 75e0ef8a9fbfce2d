"""Chunk summaries (the paper's ``summary`` representation, §3.3 and Appendix A), with full provenance.

Two backends:

* ``openai``: the paper's method, the shared client of :mod:`pmrag.represent.llm`
  (:class:`~pmrag.represent.llm.ResponsesClient`): the Responses API with ``model`` (gpt-4o-mini),
  ``instructions`` = the system prompt, ``input`` = the user template, a blank line and the first
  ``max_input_chars`` (7,000) characters of raw_text, and ``max_output_tokens=700``; temperature, top_p and seed
  are *not* sent, as in the paper.  The client's timeout is 90 s and its own retries are off
  (``max_retries=0``) so that every attempt is ours and recorded.  Any OpenAI-compatible server works through
  ``base_url``; a server that is not on this machine needs ``allow_remote: true``, and no proxy is taken from the
  environment; only the params' ``proxy``, for a remote server (see :mod:`pmrag.represent.privacy`).
* ``extractive`` (:class:`ExtractiveSummarizer`): an offline, deterministic stand-in with no model.  It
  writes a 200–500-character digest (date range, participants, salient terms, salient messages) so the
  rest of the pipeline runs without a network; every table says ``backend = extractive`` and
  ``requested_model = extractive-v1``.  It is not the paper's method.

What the paper lost and this module records per chunk (table ``summaries``): the model the *response*
reports (its snapshot), the SDK version, input characters and their SHA-256, input/output tokens, the
latency of the final attempt (successful or not), the number of attempts, the status (ok | error) with the
(key-redacted) error text, and the run; per run (table ``summary_runs``): the params (never the API key), the
SHA-256 of both prompts, the resolved base URL, SDK version, start/finish times, counts and the final status
(:class:`~pmrag.represent.llm.SummaryStore`).

The prompts in ``prompts/ja/`` (``summary_system.txt``, ``summary_user.txt``) were written from the paper's
English translation (Appendix A); the original summary_prompt_ja.txt is not public, so the Japanese
wording is ours, and summaries made with it are not byte-for-byte the paper's.  ``prompts/en/`` is an English
rendering for English corpora (LoCoMo); its length request ("approximately 80–200 words") is our translation
of 200–500 Japanese characters.  The user template ends with a blank line, after which the program appends the
input.

Failure handling is the LLM step's (:func:`~pmrag.represent.llm.run_step`): a retryable error (429, 5xx,
timeout, connection error) is retried up to ``max_retries`` times (default 2, the SDK default the paper ran
with) with capped exponential backoff (0.5 s doubling to 8 s, the SDK's).  Then ``failure_policy =
"stop_on_first_error"`` is the paper's (stop; everything committed so far is kept) and ``"retry"`` records the
chunk as an error and goes on (the study then gives it an empty summary and counts it among its losses:
:func:`pmrag.evaluate.coverage.chunks_without_summary`).  ``concurrency`` chunks are summarized at once (1, the
paper's, one after the other).  Each chunk's row is committed right after its call returns, so a killed run
loses at most the chunks in flight; rerunning skips chunks whose status is already ``ok``.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

import pandas as pd
from sqlalchemy import Engine

from pmrag.core.params import SummarizerSection
from pmrag.core.text import one_line
from pmrag.represent.llm import (CallPolicy, LLMStep, Prompts, Reply, ResponsesClient, StepItem, StepReport,
                                 StepStopped, SummaryStore, load_step_prompts, run_step)

EXTRACTIVE_MODEL = "extractive-v1"


class SummarizationStopped(StepStopped):
    """``stop_on_first_error``: a call failed; the chunk is recorded as an error and the run is stopped."""

    @property
    def chunk_id(self) -> str:
        return self.item_id

    def describe(self, noun: str) -> str:
        return (f"summarization stopped at chunk {self.item_id} (run {self.run_id}, {self.n_ok} summarized in this "
                f"run): {self.error}; rerun to resume (chunks already summarized are skipped), or set "
                f"'summarizer.failure_policy: retry'")


def _summary_text(text: str, item: StepItem) -> str:
    """A summary is the reply's text as it is (the client refuses an empty one)."""
    return text


SUMMARY = LLMStep("summary", "summaries", ("summary_system", "summary_user"), _summary_text, noun="chunk",
                  stopped=SummarizationStopped)


def load_prompts(lang_or_dir: str | Path = "ja") -> Prompts:
    """The packaged prompt set (``"ja"``, ``"en"``) or ``summary_system.txt`` + ``summary_user.txt`` from a
    directory (:func:`~pmrag.represent.llm.load_step_prompts`: a leading byte-order mark and trailing whitespace
    stripped; :meth:`~pmrag.represent.llm.Prompts.render_input` puts the blank line back before the input)."""
    return load_step_prompts(lang_or_dir, {SUMMARY.name: SUMMARY.prompt_files}, "summary prompts")[SUMMARY.name]


# --- extractive ---

_LINE_RE = re.compile(r"^(?P<date>\d{4}-\d{2}-\d{2}) (?P<time>\d{2}:\d{2}) (?P<sender>.*?): (?P<text>.*)$")
_PLACEHOLDER_RE = re.compile(r"^\s*\[[^\]\n]{1,20}\]\s*$")
_KATAKANA_RE = re.compile(r"[ァ-ヺー]{2,}")
_KANJI_RE = re.compile(r"[一-龯々〆ヵヶ]{2,}+(?:(?![ぁ-ゖ])|(?=[のにをはがとでへもやか]))")
"""A Kanji run followed by a particle, punctuation or nothing: noun-like.  One followed by other Hiragana is
usually a verb or adjective stem (``調べ``, ``降って``), which makes a poor topic term."""
_URL_RE = re.compile(r"https?://\S+")
_FILLER_TAIL_RE = re.compile(r"[\s!！?？。、,.…〜~ー―\-wｗ笑♪☆★♡❤️😊😂🙏👍]+$")
_QUOTED_RE = re.compile(r"「([^「」\n]{1,24})」|『([^『』\n]{1,24})』|[\"“]([^\"“”\n]{2,24})[\"”]")
_CAPITAL_RE = re.compile(r"(?<![A-Za-z0-9])[A-Z][a-zA-Z0-9'’\-]{1,}")
_ALNUM_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-]{2,}")
_BACKCHANNELS = {
    "うん", "うんうん", "はい", "はーい", "おけ", "おっけー", "オッケー", "ok", "okay", "了解", "りょ", "りょうかい",
    "w", "ww", "www", "笑", "草", "ありがとう", "ありがと", "あざす", "おはよう", "おやすみ", "おつかれ", "お疲れ",
    "お疲れさま", "お疲れ様", "そうなんだ", "なるほど", "たしかに", "まじか", "マジか", "えー", "へー", "ほんと", "それな",
    "いいね", "yes", "yeah", "yep", "no", "lol", "haha", "thanks", "thank you", "thx", "ok!", "sure", "cool", "nice",
    "good night", "good morning", "see you", "bye", "了解です", "了解しました", "ありがとうございます", "おはようございます",
    "わかった", "わかる", "だよね", "ごめん", "いいよ", "楽しかった", "すごい", "やばい",
}
_STOP_TERMS = {
    "今日", "明日", "昨日", "今度", "本当", "大丈夫", "了解", "自分", "一緒", "何時", "時間", "今回", "最近", "全然", "普通",
    "来週", "今週", "先週", "今週末", "来月", "今月", "先月", "今朝", "今夜", "明後日", "一昨日", "多分", "絶対",
    "I", "I'm", "I'll", "I've", "I'd", "The", "A", "An", "And", "But", "So", "Oh", "Hey", "Hi", "Hello", "Yes", "Yeah", "No",
    "Ok", "OK", "Okay", "Thanks", "Thank", "That", "This", "What", "When", "Where", "Why", "How", "Who", "It", "It's",
    "We", "You", "He", "She", "They", "My", "Your", "Me", "Sure", "Well", "Wow", "Haha", "Lol", "Good", "Great", "Nice",
    "Sounds", "Let's", "Just", "Did", "Do", "Does", "Are", "Is", "Was", "Have", "Has", "Can", "Could", "Would", "Will",
    "Not", "Also", "Maybe", "Really", "Oh", "Cool", "Awesome", "Definitely", "Absolutely", "If", "In", "On", "At",
    "For", "To", "Of", "With", "By", "From", "As", "Be", "All", "Any", "Some", "There", "Here", "Then", "Now", "Today",
    "Tomorrow", "Yesterday", "Congrats", "Glad", "Love", "Please", "Sorry", "Right", "Totally", "Exactly",
}


_STOP_WORDS = {
    "about", "after", "again", "always", "another", "around", "because", "before", "being", "better", "really",
    "should", "something", "someone", "things", "thinking", "though", "through", "together", "wanted", "wonderful",
    "amazing", "awesome", "actually", "definitely", "probably", "anything", "everything", "nothing", "pretty",
    "thanks", "whenever", "wherever", "without", "would", "could", "recently", "already", "another", "little",
}


class _Message(NamedTuple):
    index: int
    date: str
    time: str
    sender: str
    text: str


def _parse_raw_text(raw_text: str) -> list[_Message]:
    """``YYYY-MM-DD HH:MM sender: text`` lines; a line that does not start a message continues the previous one."""
    parsed: list[list] = []
    for line in raw_text.split("\n"):
        match = _LINE_RE.match(line)
        if match:
            parsed.append([match["date"], match["time"], match["sender"].strip(), match["text"]])
        elif parsed:
            parsed[-1][3] += "\n" + line
        elif line.strip():
            parsed.append(["", "", "", line])
    return [_Message(i, d, t, s, x.strip()) for i, (d, t, s, x) in enumerate(parsed)]


def _is_filler(text: str) -> bool:
    if not text or _PLACEHOLDER_RE.match(text):
        return True
    core = _FILLER_TAIL_RE.sub("", text).strip().lower()
    return not core or core in _BACKCHANNELS or len(core) <= 2


def _terms(text: str, skip: set[str], lang: str = "ja") -> list[tuple[str, float]]:
    """Named / content terms in ``text``, each with a weight.

    Quoted terms (「」, 『』, "") 3; Katakana runs and capitalised words inside a sentence 2 (at a sentence
    start 0.5: "Congratulations!" is not a name); noun-like Kanji runs 1; other alphanumeric terms 1 in
    Japanese text (``usb``, ``v2.1``), and in English only when they hold a digit (or, at 0.5, are long words).
    """
    found: list[tuple[str, float]] = []
    text = _URL_RE.sub(" ", text)
    for match in _QUOTED_RE.finditer(text):
        found.append(((match[1] or match[2] or match[3]).strip(), 3.0))
    for match in _KATAKANA_RE.finditer(text):
        found.append((match[0], 2.0))
    for match in _CAPITAL_RE.finditer(text):
        before = text[: match.start()].rstrip()
        at_start = not before or before[-1] in ".!?。！？\n\"“「"
        found.append((match[0].rstrip("'’-"), 0.5 if at_start else 2.0))
    for match in _KANJI_RE.finditer(text):
        found.append((match[0], 1.0))
    for match in _ALNUM_RE.finditer(text):
        term = match[0].rstrip("._-")
        if len(term) < 3 or term[0].isupper() or term.isdigit():
            continue
        if lang == "ja" or any(ch.isdigit() for ch in term):
            found.append((term, 1.0))
        elif len(term) >= 6:
            found.append((term, 0.5))
    return [(t, w) for t, w in found if t and t not in skip and t not in _STOP_TERMS and t.lower() not in _STOP_WORDS
            and len(t) <= 24]


class ExtractiveSummarizer:
    """A deterministic, offline digest of a chunk: header, salient terms, salient messages (≤ ``max_chars``).

    Not a model and not the paper's method: a stand-in so that summary-based representations can be built
    without sending anything anywhere.  ``lang`` picks Japanese or English labels.
    """

    backend = "extractive"
    requested_model = EXTRACTIVE_MODEL
    sdk_version = None
    calls_api = False
    pure = True   # the digest of a text alone: many calls may run in worker processes

    def __init__(self, *, lang: str = "ja", max_chars: int = 500, max_terms: int = 8, max_message_chars: int = 70):
        if lang not in ("ja", "en"):
            raise ValueError(f"lang must be 'ja' or 'en', got {lang!r}")
        self.lang, self.max_chars, self.max_terms, self.max_message_chars = lang, max_chars, max_terms, max_message_chars

    def provenance(self) -> dict:
        return {"lang": self.lang, "max_chars": self.max_chars, "max_terms": self.max_terms,
                "max_message_chars": self.max_message_chars}

    def call(self, text: str) -> Reply:
        """The digest of ``text`` as a :class:`~pmrag.represent.llm.Reply` (the LLM step's backend protocol)."""
        return Reply(text=self.digest(text), response_model=EXTRACTIVE_MODEL)

    # -- pieces

    def _header(self, messages: list[_Message]) -> str:
        ja = self.lang == "ja"
        senders = list(dict.fromkeys(m.sender for m in messages if m.sender))
        shown = senders[:5]
        if ja:
            people = "・".join(shown) + (f"ほか{len(senders) - 5}名" if len(senders) > 5 else "")
        else:
            more = len(senders) - len(shown)
            names = shown + ([f"{more} others"] if more > 0 else [])
            people = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        dated = [m for m in messages if m.date]
        if dated:
            first, last = dated[0], dated[-1]
            if first.date == last.date and first.time == last.time:
                span = f"{first.date} {first.time}"
            elif first.date == last.date:
                span = f"{first.date} {first.time}〜{last.time}" if ja else f"{first.date} {first.time}–{last.time}"
            else:
                span = f"{first.date} {first.time}〜{last.date} {last.time}" if ja else f"{first.date} {first.time} to {last.date} {last.time}"
        else:
            span = ""
        n = len(messages)
        if ja:
            return f"{span}、{people}の会話（{n}件）。" if span else f"{people}の会話（{n}件）。"
        return f"Chat between {people}{' on ' + span if span else ''} ({n} messages)."

    def _clip(self, text: str, limit: int) -> str:
        text = one_line(text)
        return text if len(text) <= limit else text[: limit - 1] + "…"

    def digest(self, raw_text: str) -> str:
        messages = _parse_raw_text(raw_text)
        if not messages:
            return ""
        ja = self.lang == "ja"
        senders = {m.sender for m in messages if m.sender}
        content = [m for m in messages if not _is_filler(m.text)]

        term_score: Counter[str] = Counter()
        first_seen: dict[str, int] = {}
        message_terms: dict[int, list[tuple[str, float]]] = {}
        for m in content:
            found = _terms(m.text, senders, self.lang)
            message_terms[m.index] = found
            for term, weight in found:
                term_score[term] += weight
                first_seen.setdefault(term, m.index)
        ranked_terms = sorted(term_score, key=lambda t: (-term_score[t], first_seen[t], t))
        # A term that is a substring of a higher-ranked term adds nothing.
        terms: list[str] = []
        for term in ranked_terms:
            if not any(term in kept for kept in terms):
                terms.append(term)
            if len(terms) == self.max_terms:
                break

        header = self._header(messages)
        topics = ""
        if terms:
            topics = ("話題: " + "、".join(terms) + "。") if ja else ("Topics: " + ", ".join(terms) + ".")
        budget = self.max_chars - len(header) - (len(topics) + 1 if topics else 0) - 1

        def score(m: _Message) -> float:
            found = message_terms.get(m.index, [])
            named = sum(w for _, w in found)
            return named + min(len(m.text), 120) / 30

        chosen: list[tuple[_Message, str]] = []
        used = 0
        for m in sorted(content, key=lambda m: (-score(m), m.index)):
            piece = self._render(m)
            cost = len(piece) + 1
            if used + cost > budget:
                continue
            chosen.append((m, piece))
            used += cost
        lines = [header] + ([topics] if topics else [])
        body = " ".join(piece for _, piece in sorted(chosen, key=lambda c: c[0].index))
        if body:
            lines.append(body)
        out = "\n".join(lines)
        return out if len(out) <= self.max_chars else out[: self.max_chars - 1] + "…"

    def _render(self, m: _Message) -> str:
        text = self._clip(m.text, self.max_message_chars)
        if not m.sender:
            return text
        return f"{m.sender}「{text}」" if self.lang == "ja" else f"{m.sender}: “{text}”"


def make_summarizer(params: SummarizerSection, prompts: str = "ja", *, allow_remote: bool = False,
                    proxy: str | None = None):
    """The backend ``params.backend`` names (the openai one checks ``allow_remote`` before anything is sent).

    ``prompts`` is the prompt set (``ja``, ``en`` or a folder); the extractive stand-in writes its labels in
    the set's language (Japanese for a folder of the user's own).  ``proxy`` (the params' top-level
    ``proxy``) is used only for a remote server that ``allow_remote`` permits; no proxy is ever taken from
    the environment (:func:`pmrag.represent.privacy.http_client`).
    """
    if params.backend == "openai":
        return ResponsesClient(params, load_prompts(prompts), sender="the openai summarizer", allow_remote=allow_remote,
                               proxy=proxy)
    return ExtractiveSummarizer(lang=prompts if prompts in ("ja", "en") else "ja")


# --------------------------------------------------------------------------------------------- runner

def summarize_chunks(
    engine: Engine,
    chunks: Iterable[tuple[str, str]],
    summarizer,
    params: SummarizerSection,
    *,
    progress: bool = True,
    sleep: Callable[[float], None] = time.sleep,
) -> StepReport:
    """Summarize ``(chunk_id, raw_text)`` pairs into table ``summaries``, one committed row per chunk.

    The LLM step :data:`SUMMARY` over the first ``params.max_input_chars`` characters of each raw_text, run by
    :func:`~pmrag.represent.llm.run_step` with ``summarizer`` (:func:`make_summarizer`) as its client.  Chunks
    already ``ok`` are skipped (resume); ``error`` rows are attempted again.  ``sleep`` waits the call interval
    and the retry backoff (inject a recorder in tests).  Returns the run's report (``seen == skipped + ok +
    error``; ``skipped_mismatched``: skipped rows another backend, model or input made); raises
    :class:`SummarizationStopped` under ``stop_on_first_error`` when a call fails.
    """
    total = len(chunks) if hasattr(chunks, "__len__") else None
    items = (StepItem(chunk_id, raw_text[: params.max_input_chars]) for chunk_id, raw_text in chunks)
    return run_step(SUMMARY, items, client=summarizer, store=SummaryStore(engine), policy=CallPolicy(params, sleep),
                    total=total, progress=progress).report


def summary_provenance(summaries_table: pd.DataFrame) -> pd.DataFrame:
    """Per backend / requested model / response model / SDK version / status: counts, tokens, latency, attempts.

    ``summaries_table`` is the store's ``summaries`` table (one row per chunk).
    """
    df = summaries_table.copy()
    keys = ["backend", "requested_model", "response_model", "sdk_version", "status"]
    columns = keys + ["chunks", "runs", "input_chars_mean", "summary_chars_mean", "input_tokens", "output_tokens",
                      "latency_s_mean", "latency_s_p95", "attempts_mean", "attempts_max", "retried_chunks"]
    if df.empty:
        return pd.DataFrame(columns=columns)
    df["summary_chars"] = df["summary"].str.len()
    df[keys] = df[keys].astype(object).where(df[keys].notna(), "(none)")
    grouped = df.groupby(keys, sort=True)
    out = grouped.agg(
        chunks=("chunk_id", "size"),
        runs=("run_id", "nunique"),
        input_chars_mean=("input_chars", "mean"),
        summary_chars_mean=("summary_chars", "mean"),
        input_tokens=("input_tokens", lambda s: s.sum(min_count=1)),
        output_tokens=("output_tokens", lambda s: s.sum(min_count=1)),
        latency_s_mean=("latency_s", "mean"),
        latency_s_p95=("latency_s", lambda s: s.quantile(0.95)),
        attempts_mean=("attempts", "mean"),
        attempts_max=("attempts", "max"),
        retried_chunks=("attempts", lambda s: int((s > 1).sum())),
    ).reset_index()
    return out[columns]


def summarize_study(engine: Engine, chunks: pd.DataFrame, section: SummarizerSection, prompts: str, *,
                    resuming: bool, allow_remote: bool = False, proxy: str | None = None,
                    progress: bool = False) -> pd.DataFrame:
    """Every chunk's summary (the study's summaries stage): stored rows are this run's only when it resumes its
    own interrupted run (``resuming``), else they are dropped first; returns the ``summaries`` table."""
    from pmrag.core import store

    if not resuming:
        with engine.begin() as conn:
            conn.execute(store.summaries.delete())
    summarizer = make_summarizer(section, prompts, allow_remote=allow_remote, proxy=proxy)
    summarize_chunks(engine, list(zip(chunks["chunk_id"], chunks["raw_text"])), summarizer, section, progress=progress)
    return store.read_table(engine, "summaries", ("chunk_id",))


def summaries_identity(summaries: pd.DataFrame) -> str:
    """The summaries' content (chunk, status, text): what representations and vectors depend on, so a rerun that
    writes the same summaries leaves its dependents current.  A chunk whose call failed has no summary (NULL in
    the store): it enters as an empty text beside its ``error`` status."""
    import hashlib

    columns = summaries[["chunk_id", "status", "summary"]]
    rows = (tuple("" if pd.isna(value) else str(value) for value in row) for row in columns.itertuples(index=False))
    return hashlib.sha256("\x1e".join("\x1f".join(row) for row in rows).encode("utf-8")).hexdigest()
