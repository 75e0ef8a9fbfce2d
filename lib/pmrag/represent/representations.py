"""The three search representations of a chunk (paper §3.3, Table 2).

* ``raw_text``: the transcript, one line per message ``YYYY-MM-DD HH:MM sender: text`` (built by chunking).
* ``summary``: a summarizer backend's text for the first 7,000 characters of raw_text (:mod:`pmrag.summarize`).
* ``embedding_text``: assembled in code, on separate lines and in this order: a fixed sentence saying this is
  a search chunk derived from the user's LINE history; the summary; the excerpt label (``原文抜粋:``); the
  first 4,000 characters of raw_text.  The LLM never writes this text; it is not raw-free (§9.1).

The ablation of §8 (which part of embedding_text helps?) adds its parts as representations of their own, built
by the same template so that nothing but the omitted part differs:

* ``prefix``: the fixed sentence alone (the same text for every chunk: it carries no chat text, so a retriever
  over it ranks by the tie-break alone; the row measures that floor);
* ``excerpt``: the first ``excerpt_chars`` characters of raw_text alone, without the label;
* ``summary_excerpt``: embedding_text without the prefix (summary, label, excerpt).

With the summary alone (``summary``) and all of it (``embedding_text``) these are the five variants the
ablation compares.

The prefix sentence and the excerpt label are text files in a prompt set: ``ja`` (the paper's Japanese,
default), ``en`` (English corpora such as LoCoMo), or a folder of the user's own with the same file names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

REPRESENTATIONS = ("raw_text", "summary", "embedding_text")
ABLATION_REPRESENTATIONS = ("prefix", "excerpt", "summary_excerpt")
PROMPTS_DIR = Path(__file__).parent / "prompts"


def prompt_dir(prompts: str) -> Path:
    """``ja`` / ``en`` name a shipped set; anything else is a folder path."""
    folder = PROMPTS_DIR / prompts if prompts in ("ja", "en") else Path(prompts)
    if not folder.is_dir():
        raise FileNotFoundError(f"prompt set {prompts!r}: no folder {folder}")
    return folder


def read_prompt(prompts: str, name: str) -> str:
    """One prompt file of a set, without its trailing newline."""
    path = prompt_dir(prompts) / f"{name}.txt"
    if not path.is_file():
        raise FileNotFoundError(f"prompt set {prompts!r}: missing {path.name} in {path.parent}")
    return path.read_text(encoding="utf-8").rstrip("\n")


@dataclass(frozen=True)
class EmbeddingTextTemplate:
    prefix: str
    excerpt_label: str
    excerpt_chars: int = 4000

    @classmethod
    def from_prompts(cls, prompts: str = "ja", excerpt_chars: int = 4000) -> "EmbeddingTextTemplate":
        return cls(read_prompt(prompts, "embedding_prefix"), read_prompt(prompts, "excerpt_label"), excerpt_chars)

    def build(self, summary: str, raw_text: str) -> str:
        """``prefix \\n summary \\n label \\n raw_text[:excerpt_chars]``."""
        return "\n".join([self.prefix, self.build_without_prefix(summary, raw_text)])

    def build_without_prefix(self, summary: str, raw_text: str) -> str:
        """``summary \\n label \\n raw_text[:excerpt_chars]``: the ``summary_excerpt`` ablation."""
        return "\n".join([summary, self.excerpt_label, self.excerpt(raw_text)])

    def excerpt(self, raw_text: str) -> str:
        """``raw_text[:excerpt_chars]``: the ``excerpt`` ablation."""
        return raw_text[: self.excerpt_chars]


def summary_input(raw_text: str, max_chars: int = 7000) -> str:
    """What the summarizer receives: the first ``max_chars`` characters of raw_text."""
    return raw_text[:max_chars]


def build_representations(chunks: pd.DataFrame, summaries: pd.DataFrame, template: EmbeddingTextTemplate) -> pd.DataFrame:
    """One row per chunk: chunk_id, raw_text, summary, summary_status, embedding_text, and the ablation's prefix
    and excerpt (its summary_excerpt: :func:`representation_texts`).

    A chunk without an ``ok`` summary keeps an empty summary and its status, and its embedding_text (and
    summary_excerpt) still carries the label and the excerpt.
    """
    merged = chunks[["chunk_id", "raw_text"]].merge(
        summaries[["chunk_id", "summary", "status"]], on="chunk_id", how="left"
    )
    merged["summary"] = merged["summary"].where(merged["status"] == "ok", "").fillna("")
    merged["summary_status"] = merged["status"].fillna("missing")
    merged["embedding_text"] = [template.build(s, r) for s, r in zip(merged["summary"], merged["raw_text"])]
    merged["prefix"] = template.prefix
    merged["excerpt"] = [template.excerpt(r) for r in merged["raw_text"]]
    return merged[["chunk_id", "raw_text", "summary", "summary_status", "embedding_text", *STORED_ABLATIONS]]


STORED_ABLATIONS = ("prefix", "excerpt")
"""The ablation texts :func:`build_representations` holds as columns: the prefix is one string for every chunk and
an excerpt is its raw_text itself when that is no longer (CPython's slice of a whole string is the string), so
neither costs memory.  ``summary_excerpt`` is not held: it is embedding_text after its prefix line
(:func:`representation_texts`), and a second copy of every embedding_text was 0.7 GB at 10× the paper's scale."""


NOT_TEXTS = ("chunk_id", "summary_status")   # the columns of build_representations' frame that are not texts


def representation_texts(representations: pd.DataFrame, name: str) -> list[str]:
    """One representation's texts in chunk order, from :func:`build_representations`' frame: a column, or for
    ``summary_excerpt`` each embedding_text without its prefix line (``build`` is ``prefix \\n`` +
    ``build_without_prefix``, so the two are equal)."""
    texts = [c for c in representations.columns if c not in NOT_TEXTS]
    if name in texts:
        return representations[name].tolist()
    if name == "summary_excerpt":
        return [text[len(prefix) + 1:] for text, prefix in zip(representations["embedding_text"],
                                                                representations["prefix"])]
    raise KeyError(f"no representation {name!r}: the representations hold {', '.join(texts)} and summary_excerpt")


def representation_lengths(representations: pd.DataFrame) -> pd.DataFrame:
    """Each chunk's ``chunk_id`` and the length in characters of its raw_text, summary and embedding_text."""
    return pd.DataFrame({"chunk_id": representations["chunk_id"].to_numpy(),
                         **{name: representations[name].str.len().to_numpy() for name in REPRESENTATIONS}})


def length_table(lengths: pd.DataFrame, thresholds=(4000, 7000)) -> pd.DataFrame:
    """Mean / p95 / max length of each representation and chunks over each threshold (paper §3.3), from
    :func:`representation_lengths`."""
    from pmrag.chunking.stats import length_stats

    return pd.DataFrame({name: length_stats(lengths[name], thresholds) for name in REPRESENTATIONS}
                        ).T.rename_axis("representation")


def example_chunk(representations: pd.DataFrame, qrels: pd.DataFrame) -> pd.Series:
    """The first primary-gold chunk of the first question (by ID) in all three forms; the first chunk if no
    question has primary gold."""
    primary = qrels[qrels["relevance"] == 2].sort_values(["question_id", "chunk_id"])
    reps = representations.set_index("chunk_id")
    return reps.loc[primary["chunk_id"].iloc[0]] if len(primary) else reps.iloc[0]


@dataclass(frozen=True)
class RepresentationProfile:
    """What is shown of a study's representations (§3.3, Table 2): every chunk's :func:`representation_lengths`
    and :func:`example_chunk`, a few kilobytes where the representations are gigabytes at 10× the paper's scale."""

    lengths: pd.DataFrame
    example: pd.Series


def representation_profile(representations: pd.DataFrame, qrels: pd.DataFrame) -> RepresentationProfile:
    return RepresentationProfile(representation_lengths(representations),
                                 example_chunk(representations, qrels)[list(REPRESENTATIONS)].copy())
