"""A deterministic synthetic LINE history with planted evidence and evaluation questions.

``generate_corpus(out_dir)`` writes, for the user ゆい over 2023-04-01..2025-03-31:

* one LINE JSON export per talk room (``family.json``, ``partner.json``, ``friends_highschool.json``,
  ``club_tennis.json``, ``parttime_cafe.json``, ``study_group.json``, ``work_project.json``,
  ``dm_mai.json``, ``dm_saki.json``, ``dm_souta.json``): an object keyed by ``YYYY-MM-DD`` in date
  order whose values are lists of ``{"time", "sender", "type", "text"}`` messages (paper §3.2);
* ``questions.json``: ``{"questions": [...]}`` with ``question_id``, ``question``, ``type``
  (named_entity / contextual / aggregate, 34/49/17 per 100), ``answer``, ``tags`` (``{"cue": ...}``: the
  rule the question's words follow, ``exact``, ``paraphrase`` or ``mixed``; see :mod:`pmrag.demo.episodes`) and
  ``evidence`` as ``{"source", "source_order", "relevance"}`` where ``source_order`` is the 0-based position of
  the message in its file counted across all dates, and relevance 2 = primary, 1 = supporting;
* ``manifest.json``: the returned manifest: ``seed``, ``n_messages`` (written, = requested),
  ``messages_per_source``, ``n_questions``, ``questions_per_type``, ``files`` (the source files, in
  a fixed order) and ``questions_file``.  It is not a LINE export: ingest ``files`` only.

``n_messages`` is met exactly.  The planted evidence and the questions depend only on ``seed`` and
``n_questions``; ``n_messages`` changes only the filler around them (and so the positions).
"""

from __future__ import annotations

from pathlib import Path

from pmrag.demo.episodes import capacity, max_questions, type_counts
from pmrag.demo.generator import generate, min_messages, planted_episodes

__all__ = ["generate_corpus", "planted_episodes", "type_counts", "capacity", "max_questions", "min_messages"]


def generate_corpus(out_dir: Path, *, seed: int = 20240410, n_messages: int = 12000, n_questions: int = 100) -> dict:
    """Write the synthetic corpus into ``out_dir`` and return its manifest.

    Same arguments give byte-identical files.  ``n_messages`` is the exact total over all source
    files (at least :func:`min_messages` of ``n_questions``: the planted messages plus 100 per source;
    ``ValueError`` otherwise).
    ``n_questions`` keeps the paper's type proportions by largest-remainder rounding and may be at
    most :func:`max_questions` (``ValueError`` otherwise).
    """
    if not isinstance(n_messages, int) or isinstance(n_messages, bool):
        raise TypeError(f"n_messages must be an int, got {type(n_messages).__name__}")
    if not isinstance(n_questions, int) or isinstance(n_questions, bool):
        raise TypeError(f"n_questions must be an int, got {type(n_questions).__name__}")
    if n_questions > max_questions():
        raise ValueError(f"n_questions={n_questions} exceeds the {max_questions()} distinct questions defined")
    return generate(Path(out_dir), seed, n_messages, n_questions)
