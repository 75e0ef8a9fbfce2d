"""Gold for a new history (000 §4.2–4.3): question candidates, pooled candidate chunks, grades, agreement.

The paper's gold came from a pipeline: a model proposed candidate questions with candidate evidence (time,
speaker, excerpt); the excerpts were matched to messages and, through ``line_chunk_messages``, to chunks; one
researcher graded the candidate rows 0/1/2; questions without primary gold were dropped.  This package is that
pipeline, with what §8 lists as missing: pools of known depth, several annotators and their agreement, and a
measure of how incomplete gold moves the numbers.

The data live in the store (:mod:`pmrag.core.store`, the gold-annotation tables), never in widget state:

* ``question_candidates`` / ``candidate_hints``: questions proposed by a model or typed by the researcher, each
  with its origin and status (proposed, accepted, edited, dropped with a reason) and its evidence hints
  (:mod:`pmrag.annotate.candidates`; a model's proposals from the messages: :mod:`pmrag.annotate.propose`);
* ``hint_matches``: the messages each hint matched, and how (text, time + speaker, excerpt search);
* ``pool``: per question the chunks to grade, in a seeded blind order, with each chunk's origins (which retriever
  at which rank, or which hint) — :mod:`pmrag.annotate.pool`;
* ``judgments`` / ``question_drops`` / ``adjudications``: grades per annotator, dropped questions, settled grades.

Where several annotators graded the same chunks, :mod:`pmrag.annotate.agreement` measures their agreement
(weighted κ per pair, ordinal α, with bootstrap intervals over questions, by question type) and
:mod:`pmrag.annotate.adjudicate` lists their disagreements and stores the settled grades.

Notebook 11 walks the pipeline in an annotation store of its own beside a study (:mod:`pmrag.annotate.workspace`:
the history copied in, the study's store only read); on the demo :mod:`pmrag.annotate.simulate` stands in for the
annotators (the dataset's own gold, and a seeded perturbation of it), said as such wherever it is used.

How incomplete gold moves the numbers (notebook 10) is measured against gold known to be complete (the demo's):
:mod:`pmrag.annotate.judged` scores runs against incomplete judgments (judged@k, condensed lists, bpref) and
:mod:`pmrag.annotate.incomplete` builds pools judged by the complete gold, at several depths and leaving one
retriever out.
"""
