"""``Study``: the facade a notebook holds — the run folder, the store, the stage engine and its memo.

It holds no logic of its own: each accessor asks the engine for a stage's result (memoised in this
process, cached on disk by a key over code, params and data; see :mod:`pmrag.study.engine`) or a part of it.
Every computation lives in the pipeline's modules, called by the stages of :mod:`pmrag.study.stages`.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Sequence
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from pmrag.core import store
from pmrag.core.memory import older_objects_frozen, return_freed_memory, trim_heap
from pmrag.core.names import RetrieverId, StageKey
from pmrag.core.params import HASHED_STAND_IN, StudyParams
from pmrag.evaluate.coverage import Coverage
from pmrag.evaluate.gold import EvaluationSet
from pmrag.evaluate.sweep import Hybrids
from pmrag.present.artifacts import FigureSpec, Saved, TableSpec, check_columns, write_csv, write_figure
from pmrag.represent.embed import QueryVectors
from pmrag.study.declare import Runtime
from pmrag.study.engine import Engine, StageStatus
from pmrag.study.notebooks import check_read, current_reader, reads_declared
from pmrag.study.params import load_params, load_params_with
from pmrag.study.pipeline import build_stages, file_label
from pmrag.study.runfolder import STORE_FILE, check_run_folder, claim_run_folder


STAND_IN_COLUMN = "summarizer"
EMBEDDER_STAND_IN_COLUMN = "embedder"
PUBLIC_FORMATS = frozenset({"locomo"})   # ingest formats of public benchmarks (chat text may be shown)
FACADE_FORCE = "pass force=True to Study.from_params to write into it anyway"


def _yaml(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _announce(status: StageStatus) -> None:
    """Under overrides, each stage computed is said as it starts, with why (the words of ``pmrag status``)."""
    print(f"recomputing {status.name}: {status.reason}", flush=True)


def _reads_guard(stem: str | None):
    """In a notebook's kernel the runner started: a check that fails a read of a stage the notebook does not
    declare (:data:`pmrag.study.notebooks.NOTEBOOK_READS`); None elsewhere."""
    declared = reads_declared(stem)
    return None if declared is None else partial(check_read, stem, declared)


class Study:
    """A study run: ``Study.from_params("params/demo.yaml")``.

    Its run folder (``outputs_dir/run``) is created and marked as pmrag's, or taken over when an older pmrag made
    it; a folder that holds someone else's files is refused unless ``force=True`` (:mod:`pmrag.study.runfolder`).
    ``claim=False`` (``pmrag status``) writes no mark: the folder is only checked.

    Stage results: :meth:`get` (any stage by name) and one accessor per stage (:meth:`ingest_report`,
    :meth:`chunks`, :meth:`evaluation`, :meth:`summaries`, :meth:`representations`, :meth:`vectors`,
    :meth:`query_vectors`, :meth:`ranked`, :meth:`metrics`, :meth:`sweep`, :meth:`hybrids`,
    :meth:`reliability`, :meth:`failures`); store tables: :meth:`messages`, :meth:`chunk_messages`,
    :meth:`questions`, :meth:`qrels`, :meth:`rejections`.
    """

    def __init__(self, params: StudyParams, notebooks: Sequence[Path] = (), *, force: bool = False,
                 claim: bool = True):
        self.params = params
        self.run_dir = params.run_dir
        if claim:   # the run folder is pmrag's, or refused before anything is written (pmrag.study.runfolder)
            claim_run_folder(self.run_dir, force=force, how_to_force=FACADE_FORCE)
        else:
            check_run_folder(self.run_dir)
        self.store = store.open_store(self.run_dir / STORE_FILE)
        stages = build_stages(params, list(notebooks))
        self.computed_stages = tuple(str(stage.key) for stage in stages if stage.key.name != "notebook")
        runtime = Runtime(self.store, self.run_dir, Path(params.cache_dir), Path(params.notebooks_dir), params.path,
                          params.allow_remote, params.proxy, progress="JPY_SESSION_NAME" in os.environ)
        self.engine = Engine(stages, runtime, file_label(params))
        self.engine.guard = _reads_guard(current_reader())
        self.overrides: dict = {}                     # dotted keys set over the params file's (from_params)
        self.file_params: StudyParams | None = None   # the params file's own values, under overrides

    @classmethod
    def from_params(cls, path, notebooks: Sequence[Path] = (), *, force: bool = False, overrides=None) -> Study:
        """The study of a params file; ``notebooks`` adds a stage per notebook (the runner's executed copies).

        Parameters
        ----------
        path : the params YAML file.
        notebooks : numbered notebooks, each made a stage (``pmrag study`` executes them).
        force : write into a run folder that holds files pmrag did not write (refused otherwise, with
            :class:`~pmrag.study.runfolder.ForeignRunFolder`, before anything is written there).
        overrides : dotted params keys set over the file's values, ``{"hybrid.beta_step": 0.1}`` or its
            JSON/YAML text (:mod:`pmrag.study.overrides`): the study then runs in a run folder of its own, seeded
            with this study's cached stages, and says each stage it recomputes and why.
        """
        from pmrag.study.overrides import overrides_run, parse_overrides, seed_run_folder

        changes = parse_overrides(overrides)
        if not changes:
            return cls(load_params(path), notebooks, force=force)
        file_params, params = load_params_with(path, changes)
        params = params.model_copy(update={"run": overrides_run(file_params.run, changes)})
        seed_run_folder(file_params.run_dir, params.run_dir)
        study = cls(params, notebooks, force=force)
        study.overrides, study.file_params = changes, file_params
        study.engine.announce = _announce
        return study

    def params_note(self, this: str) -> str:
        """One short line on where the params come from; under overrides, what they change, where the results go,
        the stages they make stale and why, and what stays the params file's (``this``: the notebook's stem or
        number, e.g. ``"04"``; :func:`pmrag.study.overrides.overrides_note`)."""
        from pmrag.study.overrides import notebooks_after, overrides_note
        from pmrag.study.runner import study_notebooks

        if not self.overrides:
            return overrides_note(self.params, None, {}, [], [])
        statuses = self.status()
        stale = [status.name for status in statuses if status.state != "cached"]
        later = notebooks_after(study_notebooks(self.params), this, stale)
        return overrides_note(self.params, self.file_params, self.overrides, statuses, later)

    # -- the engine ----------------------------------------------------------------------------------
    def get(self, stage: StageKey | str):
        """A stage's result (computed once, then cached and memoised): ``study.get("hybrids")``,
        ``study.get(StageKey("vectors", "summary"))``."""
        return self.engine.get(stage)

    def build(self, *, progress: bool | None = None, before=None, after=None,
              hold: Collection[str] | None = None, helper: bool = False) -> None:
        """Compute every stage that is not cached (upstream first); notebooks are the runner's to execute.

        With ``progress`` (default: :attr:`progress`) a bar counts the stages (the current one as its postfix)
        and the long stages (summaries, embeddings) add their own bars with an ETA.  ``before(name)``, when
        given, runs before each stage is asked for, its upstream stages computed (it may raise to stop there);
        ``after(name)`` after each stage is computed and stored (the runner starts the notebooks that read it).

        It holds the run folder's lock (:func:`~pmrag.study.runner.held_run_folder`): a second process building or
        running the same run folder is refused with :class:`~pmrag.study.runner.RunInUse`, not let in to mix its
        results with these.

        A result that later stages read stays in memory until the last of them is computed; then it is dropped (the
        cache on disk keeps it, and an accessor loads it again), and after each stage the pages freed go back to the
        system (:mod:`pmrag.core.memory`), so the next stage's arrays do not come on top of them.  A result no stage
        reads (a table's, the coverage) stays for the caller; with ``hold`` only those of the stages it names do,
        the others are dropped as soon as they are stored (the runner holds the coverage, whose warnings it prints:
        its notebooks load what they read in their own kernels).

        ``helper``: a second process computes later stages whose inputs are ready meanwhile, for a study of the
        size :data:`~pmrag.study.helper.HELPER_MESSAGES` names (:class:`~pmrag.study.helper.StageHelper`)."""
        from tqdm.auto import tqdm

        from pmrag.study.helper import LOOP_ONLY, StageHelper
        from pmrag.study.runner import held_run_folder

        with held_run_folder(self.params.run_dir), older_objects_frozen():
            previous = self.progress
            self.progress = previous if progress is None else progress
            bar = tqdm(total=len(self.computed_stages), desc="stages", unit="stage", disable=not self.progress)
            last_read = self._last_reads()
            second, pending = None, helper   # the helper starts once the ingest and the chunks are computed
            try:
                for position, name in enumerate(self.computed_stages):
                    bar.set_postfix_str(name, refresh=True)
                    if before is not None:
                        before(name)
                    if pending and name.split(":")[0] not in LOOP_ONLY:
                        pending, second = False, StageHelper.start(self)
                    if second is not None:
                        second.wait_for(name)
                    self.engine.get(name, retry=True)
                    read_out = [done for done, last in last_read.items() if last == position]
                    if hold is not None and name not in last_read and name not in hold:
                        read_out.append(name)
                    for done in read_out:
                        self.engine.memo.pop(self.engine.stage(done).key, None)
                    if read_out:
                        return_freed_memory()   # the results just dropped
                    else:
                        trim_heap()             # the pages the stage freed
                    if after is not None:
                        after(name)
                    bar.update(1)
            finally:
                if second is not None:
                    second.stop()
                bar.close()
                self.progress = previous

    def _last_reads(self) -> dict[str, int]:
        """The computed stages that other computed stages read, each with the position in :attr:`computed_stages`
        of the last one that does."""
        computed, last = set(self.computed_stages), {}
        for position, name in enumerate(self.computed_stages):
            for need in self.engine.stage(name).needs:
                if str(need) in computed:
                    last[str(need)] = position
        return last

    @property
    def progress(self) -> bool:
        """Whether computing a stage shows progress bars (in the terminal, or in the cell in JupyterLab).  On by
        default in a kernel that a Jupyter server started for an open notebook (``JPY_SESSION_NAME`` is set);
        off under papermill and nbval, whose recorded outputs must not hold bars."""
        return self.engine.progress

    @progress.setter
    def progress(self, value: bool) -> None:
        self.engine.progress = bool(value)

    def status(self) -> list[StageStatus]:
        """Each stage as cached / stale (why) / incomplete / missing; computes nothing."""
        return self.engine.status()

    def forget(self) -> None:
        """Drop every cached stage result of this run (the next access recomputes)."""
        self.engine.forget()

    # -- stage results -------------------------------------------------------------------------------
    def ingest_report(self) -> pd.DataFrame:
        """Per input file: read / stored / already present / rejected, encoding and dialect."""
        return self.get("ingest").report

    def chunks(self) -> pd.DataFrame:
        return self.get("chunks").chunks

    def chunk_table(self) -> pd.DataFrame:
        """:meth:`chunks` without their texts (ids, sources, sessions, times and message counts): what a reader
        that counts, lists or orders the chunks needs, without loading their texts and messages."""
        return self.get("chunk_table")

    def chunk_ids(self) -> pd.Index:
        """Every chunk's id, in chunk order (from :meth:`chunk_table`)."""
        return pd.Index(self.chunk_table()["chunk_id"], name="chunk_id")

    def evaluation(self) -> EvaluationSet:
        """The evaluable questions (primary gold in some chunk) and their qrels."""
        return self.get("qrels")

    def coverage(self) -> Coverage:
        """What the study loses: messages in no chunk, questions dropped and why, and the primary evidence each
        retriever never sees (:mod:`pmrag.evaluate.coverage`)."""
        return self.get("coverage")

    def question_types(self) -> list[str]:
        """The evaluated question types in the one order every table and figure uses (the paper's three first,
        then by name; :func:`pmrag.evaluate.analysis.question_types`)."""
        from pmrag.evaluate.analysis import question_types

        return question_types(self.evaluation().questions)

    def summaries(self) -> pd.DataFrame:
        return self.get("summaries")

    def representations(self) -> pd.DataFrame:
        """chunk_id, raw_text, summary, summary_status, embedding_text for every chunk (in chunk order)."""
        return self.get("representations")

    def representation_profile(self):
        """Every chunk's raw_text, summary and embedding_text lengths and one example chunk in all three forms
        (:class:`~pmrag.represent.representations.RepresentationProfile`), without loading the representations."""
        return self.get("representation_profile")

    def vectors(self, representation: str) -> tuple[np.ndarray, list[str]]:
        """``(matrix, chunk_ids)`` of one representation, checked against the texts that were sent."""
        return self.get(StageKey("vectors", representation)).load(self.store, self.run_dir)

    def vector_summary(self) -> pd.DataFrame:
        """Per embedded representation: model, rows, dimension, and the length of the text actually sent."""
        from pmrag.represent.embed import vector_summary
        from pmrag.study.items import embedded_representations

        infos = [self.get(StageKey("vectors", r)) for r in embedded_representations(self.params)]
        return vector_summary(self.store, [(i.representation, i.model_id, self.run_dir / Path(i.path).parent)
                                           for i in infos])

    def query_vectors(self) -> QueryVectors:
        return self.get("query_vectors")

    def retrievers(self) -> tuple[RetrieverId, ...]:
        return self.params.retrieval.retriever_ids()

    def ranked(self, retriever: RetrieverId | str):
        """One retriever's :class:`~pmrag.retrieve.retrievers.Ranked` (rankings and matching-chunk counts)."""
        return self.get(StageKey("runs", str(RetrieverId.parse(str(retriever)))))

    def rankings(self, *, fused: bool = False) -> dict[str, pd.DataFrame]:
        """Every single retriever's rankings, by name, in the configured order; ``fused``: then the fused ranking
        of each pairing's selected hybrid and of the diagnostic hybrid (:attr:`Hybrids.rankings`), by name."""
        singles = {str(rid): self.ranked(rid).rankings for rid in self.retrievers()}
        return {**singles, **(self.hybrids().rankings or {})} if fused else singles

    def metrics(self) -> pd.DataFrame:
        """Per-question metrics of every single retriever (every cut-off of ``params.metric_ks()``)."""
        return self.get("metrics")

    def sweep(self) -> pd.DataFrame:
        """Per-question Recall/MRR/nDCG@5 of every pairing × β."""
        return self.get("sweep")

    def hybrids(self) -> Hybrids:
        return self.get("hybrids")

    def per_question(self) -> pd.DataFrame:
        """Per-question rows of every method the analysis compares: single retrievers, each pairing's selected
        hybrid, and the diagnostic hybrid."""
        return pd.concat([self.metrics(), self.hybrids().per_question], ignore_index=True)

    def selection(self):
        """:class:`~pmrag.evaluate.analysis.Selection`: the best hybrid, the reference retriever, the diagnostic hybrid."""
        from pmrag.evaluate.analysis import Selection

        analysis = self.params.analysis
        return Selection(self.hybrids().selected, RetrieverId.parse(analysis.reference_retriever), analysis.diagnostic())

    def reliability(self):
        return self.get("reliability")

    def graph(self):
        """TOBUGraph's memory graph: :class:`~pmrag.represent.graph.BuiltGraph` (graph, interest vectors, the
        extractor's label and provenance)."""
        return self.get("graph")

    def interest_relevance(self):
        """:class:`~pmrag.retrieve.graph_interest.InterestRelevance`: r(q, i) of every evaluable question and
        interest (offline scoring or an LLM's choice, ``graph.relevance``)."""
        return self.get("interest_relevance")

    def statistics(self):
        """:class:`~pmrag.evaluate.statistics.SelectionStatistics`: selection-aware intervals, evidence groups,
        adjusted comparisons and power (§8.1, §9.1)."""
        return self.get("statistics")

    def multifusion(self) -> list:
        """:class:`~pmrag.evaluate.multisweep.MultiFusion` of every ``hybrid.multi`` list and fusion (weights chosen
        on training folds, scored out of fold); empty when ``hybrid.multi`` lists none."""
        return self.get("multifusion") if self.params.hybrid.multi else []

    def graph_evaluation(self):
        """:class:`~pmrag.evaluate.graph_eval.GraphEvaluation`: TOBUGraph, its RAG baselines and the flat retrievers,
        choices made on the tuning part of the questions."""
        return self.get("graph_evaluation")

    def failures(self):
        return self.get("failures")

    # -- store tables --------------------------------------------------------------------------------
    def messages(self, columns: Iterable[str] | None = None) -> pd.DataFrame:
        """Every stored message, by source, time and position in its file (only ``columns``, when given).

        Read from the store (its ingest current first), not a stage's cached copy: millions of messages at scale,
        read by a few notebooks, would otherwise be read, held and pickled by the process computing the stages."""
        self.get("ingest")
        return store.stored_messages(self.store, columns)

    def message_inventory(self) -> pd.DataFrame:
        """Message types, and how many records had a missing time/sender or an empty text
        (:func:`pmrag.chunking.stats.message_inventory`, counted in the store)."""
        from pmrag.chunking.stats import message_inventory

        self.get("ingest")
        return message_inventory(self.store)

    def message_count(self) -> int:
        """How many messages the store holds."""
        return self.get("ingest").n_messages

    def chunk_messages(self) -> pd.DataFrame:
        """Which messages each chunk holds, by chunk and position (the paper's line_chunk_messages)."""
        return self.get("chunks").members

    def sessions(self) -> pd.DataFrame:
        """The messages of each session (§3.2): ``source``, ``messages``; sources in name order, sessions in time
        order (counted while chunking: :attr:`pmrag.chunking.store.Chunked.sessions`)."""
        return self.get("chunks").sessions

    def questions(self) -> pd.DataFrame:
        """Every question ingested (evaluable or not); :meth:`evaluation` has the evaluable ones."""
        return self.get("ingest").questions

    def chunk_speakers(self) -> pd.Series:
        """``chunk_id → "A, B"``: each chunk's distinct senders in order of first appearance
        (:func:`pmrag.chunking.stats.chunk_speakers`), found while chunking
        (:attr:`pmrag.chunking.store.Chunked.speakers`)."""
        return self.get("chunks").speakers

    def private_strings(self) -> dict[str, set[str]]:
        """What a public export must never contain (:func:`pmrag.present.public.private_strings`)."""
        return self.get("private_strings")

    def question_evidence(self) -> pd.DataFrame:
        return self.get("ingest").evidence

    def qrels(self) -> pd.DataFrame:
        """Chunk-level gold of every question (:meth:`evaluation` has the evaluable questions' only)."""
        return self.get("chunks").qrels

    def rejections(self) -> pd.DataFrame:
        return self.get("ingest").rejections

    # -- outputs -------------------------------------------------------------------------------------
    def path(self, *parts: str) -> Path:
        """A path under the run folder, with its parent folder created."""
        target = self.run_dir.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def save_table(self, spec: TableSpec, frame: pd.DataFrame) -> str:
        """Write a declared table to ``outputs/<run>/tables/<name>.csv`` rounded and to ``tables/full/<name>.csv``
        at full precision (:func:`pmrag.present.artifacts.write_csv`); returns its path in the run folder."""
        if not isinstance(spec, TableSpec):
            raise TypeError(f"save_table takes a declared table (pmrag.present.artifacts.T), got {spec!r}")
        check_columns(spec, frame.columns)
        note = self.summarizer_note()
        if note is not None:   # a table made with the offline stand-in says so in every row (README promise)
            frame = frame.assign(**{STAND_IN_COLUMN: note})
        vectors = self.embedder_note()
        if vectors is not None:   # and so does one whose dense vectors come from the hashed stand-in
            frame = frame.assign(**{EMBEDDER_STAND_IN_COLUMN: vectors})
        write_csv(self.path(spec.file), frame)
        return Saved(spec.file)

    def summarizer_note(self) -> str | None:
        """What every saved table says of its summaries when they come from the offline extractive stand-in
        (``summarizer`` column); None when an LLM wrote them."""
        section = self.params.summarizer
        return section.label() if section.backend == "extractive" else None

    def embedder_note(self) -> str | None:
        """What every saved table says of its dense vectors when they come from the hashed stand-in (``embedder``
        column); None when a model made them."""
        section = self.params.embedding
        return section.label() if section.backend == HASHED_STAND_IN else None

    def shows_chat_text(self) -> bool:
        """Whether notebooks may print chat text (``dataset.show_chat_text``): ``auto`` shows it only when every
        input is public data — the embedded synthetic demo or a public benchmark (LoCoMo) — never a user's export."""
        setting = self.params.dataset.show_chat_text
        if setting != "auto":
            return setting
        formats = set(self.ingest_report()["format"])
        synthetic = self.params.dataset.synthetic.enabled and not self.params.dataset.inputs
        return synthetic or (bool(formats) and formats <= PUBLIC_FORMATS)

    def chat_text_caption(self) -> str:
        """The caption above printed chat text, saying why it is (or is not) shown."""
        dataset = self.params.dataset
        if not self.shows_chat_text():
            return ("chat text hidden: this study's inputs are private chats (dataset.show_chat_text: "
                    f"{_yaml(dataset.show_chat_text)}); set it to true to print them in your own copy")
        what = "the embedded synthetic demo" if dataset.synthetic.enabled and not dataset.inputs else "public data"
        return f"chat text shown: {what} (dataset.show_chat_text: {_yaml(dataset.show_chat_text)})"

    def save_figure(self, spec: FigureSpec, fig) -> str:
        """Write a declared figure to ``outputs/<run>/figures/<name>.png``; returns its path in the run folder."""
        if not isinstance(spec, FigureSpec):
            raise TypeError(f"save_figure takes a declared figure (pmrag.present.artifacts.F), got {spec!r}")
        return write_figure(self.run_dir, spec, fig)
