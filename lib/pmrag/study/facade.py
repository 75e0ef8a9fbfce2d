"""A study: params + a run directory + the SQLite store, with stages computed once and cached.

Each stage stores a key (a hash of the inputs and params it depends on) in the ``stages`` table; asking
for a stage whose key is unchanged returns the stored result, so every notebook can be executed on its
own.  A changed key recomputes that stage and everything after it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from pmrag.core import store
from pmrag.chunking import store as chunk_store
from pmrag.ingest import store as ingest_store
from pmrag.chunking.windows import ChunkingParams
from pmrag.ingest import IngestOptions
from pmrag.ingest.pipeline import read_all
from pmrag.study.params import Params, load_params

SYNTHETIC_DIR = "data"


def get_stage(engine, name: str):
    import json
    with engine.connect() as conn:
        row = conn.execute(store.select(store.stages.c.key, store.stages.c.info).where(store.stages.c.name == name)).first()
    return None if row is None else (row.key, json.loads(row.info))


def set_stage(engine, name: str, key: str, info: dict) -> None:
    import json
    with engine.begin() as conn:
        conn.execute(store.insert(store.stages).prefix_with("OR REPLACE"), [{"name": name, "key": key, "info": json.dumps(info, sort_keys=True)}])


def _hash(payload) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


class Study:
    def __init__(self, params: Params):
        self.params = params
        self.run_dir = params.run_dir
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.engine = store.open_store(self.run_dir / "study.sqlite")

    @classmethod
    def from_params(cls, path) -> "Study":
        return cls(load_params(path))

    def path(self, *parts: str) -> Path:
        """A path under the run directory, with its parent folder created."""
        target = self.run_dir.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    # -- stage: input files ---------------------------------------------------------------------
    def input_files(self) -> tuple[list[Path], Path | None]:
        """The files to ingest and the questions file; generates the synthetic corpus when enabled."""
        dataset = self.params.section("dataset")
        files = [Path(p) for p in dataset["inputs"]]
        questions = Path(dataset["questions"]) if dataset["questions"] else None
        synthetic = dataset["synthetic"]
        if synthetic["enabled"]:
            corpus_dir = self.run_dir / SYNTHETIC_DIR
            manifest = self._synthetic_corpus(corpus_dir, synthetic)
            files += [corpus_dir / name for name in manifest["files"]]
            questions = corpus_dir / manifest["questions_file"]
        return files, questions

    def _synthetic_corpus(self, corpus_dir: Path, synthetic: dict) -> dict:
        """Generate the demo corpus unless the same arguments and generator code already made it."""
        import pmrag.demo
        from pmrag.demo import generate_corpus

        wanted = {k: synthetic[k] for k in ("seed", "n_messages", "n_questions")}
        code = sorted(Path(pmrag.demo.__file__).parent.glob("*.py"))
        key = _hash({"args": wanted, "code": {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in code}})
        manifest_path = corpus_dir / "manifest.json"
        cached = get_stage(self.engine, "synthetic")
        if cached and cached[0] == key and manifest_path.is_file():
            return json.loads(manifest_path.read_text(encoding="utf-8"))
        manifest = generate_corpus(corpus_dir, **wanted)
        set_stage(self.engine, "synthetic", key, {})
        return manifest

    # -- stage: ingest --------------------------------------------------------------------------
    def ingest(self) -> pd.DataFrame:
        """Ingest every input file (once); returns the per-file reconciliation."""
        dataset = self.params.section("dataset")
        files, questions = self.input_files()
        hashes = {str(p): store.file_sha256(p) for p in files + ([questions] if questions else [])}
        options = IngestOptions(unknown_time_offset=dataset["unknown_time_offset"])
        key = _hash({"files": hashes, "format": dataset["format"], "permissive": dataset["permissive"], "options": asdict(options)})
        cached = get_stage(self.engine, "ingest")
        if cached and cached[0] == key:
            return pd.DataFrame(cached[1]["reports"])
        self._clear(store.messages, store.questions, store.question_evidence, store.files, store.rejections)
        jobs = [(path, dataset["format"]) for path in files] + ([(questions, "questions-json")] if questions else [])
        reports = []
        for batch, rows in read_all(jobs, permissive=dataset["permissive"], options=options):
            reports.append(asdict(ingest_store.store_batch(self.engine, batch, hashes[batch.path], rows)))
        for report in reports:
            report["path"] = self._display_path(report["path"])
        set_stage(self.engine, "ingest", key, {"reports": reports})
        set_stage(self.engine, "chunks", "", {})
        return pd.DataFrame(reports)

    def _display_path(self, path: str) -> str:
        """Paths in reports are relative to the run directory or the params file, never absolute."""
        for base in (self.run_dir, self.params.path.parent.parent):
            try:
                return str(Path(path).relative_to(base))
            except ValueError:
                continue
        return Path(path).name

    def _clear(self, *tables) -> None:
        with self.engine.begin() as conn:
            for table in tables:
                conn.execute(table.delete())

    # -- stage: chunks and qrels ----------------------------------------------------------------
    def chunking_params(self) -> ChunkingParams:
        return ChunkingParams(**self.params.section("chunking"))

    def build_chunks(self) -> dict:
        """Chunk every source and derive chunk-level gold (once per ingest + chunking params)."""
        self.ingest()
        chunking = self.chunking_params()
        key = _hash({"ingest": get_stage(self.engine, "ingest")[0], "chunking": asdict(chunking)})
        cached = get_stage(self.engine, "chunks")
        if cached and cached[0] == key:
            return cached[1]
        n_chunks = chunk_store.rebuild_chunks(self.engine, chunking)
        chunk_store.derive_qrels(self.engine)
        info = {"n_chunks": n_chunks}
        set_stage(self.engine, "chunks", key, info)
        return info

    # -- tables ---------------------------------------------------------------------------------
    def messages(self) -> pd.DataFrame:
        self.ingest()
        return store.read_table(self.engine, "messages", ("source", "occurred_at", "source_order"))

    def chunks(self) -> pd.DataFrame:
        self.build_chunks()
        return store.read_table(self.engine, "chunks", ("source", "chunk_index"))

    def chunk_messages(self) -> pd.DataFrame:
        self.build_chunks()
        return store.read_table(self.engine, "chunk_messages", ("chunk_id", "position"))

    def questions(self) -> pd.DataFrame:
        self.ingest()
        return store.read_table(self.engine, "questions", ("question_id",))

    def question_evidence(self) -> pd.DataFrame:
        self.ingest()
        return store.read_table(self.engine, "question_evidence", ("question_id", "message_id"))

    def qrels(self) -> pd.DataFrame:
        self.build_chunks()
        return store.read_table(self.engine, "qrels", ("question_id", "chunk_id"))

    def rejections(self) -> pd.DataFrame:
        self.ingest()
        return store.read_table(self.engine, "rejections", ("sha256", "location"))

    def session_sizes(self) -> list[int]:
        """Messages per session, every source, in source then time order."""
        from pmrag.chunking.windows import sort_messages, split_sessions

        gap = self.chunking_params().session_gap_minutes
        self.ingest()
        return [
            len(session)
            for _, msgs in sorted(chunk_store.load_chunk_messages(self.engine).items())
            for session in split_sessions(sort_messages(msgs), gap)
        ]

    def save_table(self, frame: pd.DataFrame, name: str) -> str:
        """Write ``frame`` to ``outputs/<run>/tables/<name>.csv``; returns the path within the run directory."""
        target = self.path("tables", f"{name}.csv")
        frame.to_csv(target, index=False)
        return str(target.relative_to(self.run_dir))

    def save_figure(self, fig, name: str) -> str:
        """Write ``fig`` to ``outputs/<run>/figures/<name>.png``; returns the path within the run directory."""
        target = self.path("figures", f"{name}.png")
        fig.savefig(target, dpi=120, metadata={"Software": None})
        return str(target.relative_to(self.run_dir))

    # -- stage: summaries and representations ---------------------------------------------------
    def summarizer_params(self):
        from pmrag.represent.summarize import SummarizerParams

        return SummarizerParams.from_dict({
            **self.params.section("summarizer"),
            "allow_remote": self.params.data["allow_remote"],
            "prompts": self.params.data["representations"]["prompts"],
        })

    def summarizer_label(self) -> str:
        params = self.summarizer_params()
        if params.backend == "extractive":
            return "extractive (offline stand-in, not an LLM)"
        return f"openai {params.model}"

    def build_summaries(self, *, progress: bool = False):
        """Summarize every chunk without an ``ok`` summary (resumes an interrupted run).

        The stage key covers what changes a summary's content (backend, model, output budget, input limit,
        prompt texts); when it changes the old summaries are cleared, otherwise a rerun only fills gaps.
        Returns the run report, or None when every chunk already had its summary.
        """
        from pmrag.represent.summarize import load_chunk_texts, load_prompts, make_summarizer, summarize_chunks

        self.build_chunks()
        params = self.summarizer_params()
        prompts = load_prompts(params.prompts)
        key = _hash({
            "chunks": get_stage(self.engine, "chunks")[0], "backend": params.backend, "model": params.model,
            "max_output_tokens": params.max_output_tokens, "max_input_chars": params.max_input_chars,
            "prompts": prompts.sha256(),
        })
        cached = get_stage(self.engine, "summaries")
        if not cached or cached[0] != key:
            self._clear(store.summaries)
            set_stage(self.engine, "summaries", key, {})
        texts = load_chunk_texts(self.engine)
        with self.engine.connect() as conn:
            n_ok = conn.execute(
                store.select(store.func.count()).select_from(store.summaries).where(store.summaries.c.status == "ok")
            ).scalar_one()
        if n_ok == len(texts):
            return None
        return summarize_chunks(self.engine, texts, make_summarizer(params, prompts), params, progress=progress)

    def summaries(self) -> pd.DataFrame:
        self.build_summaries()
        return store.read_table(self.engine, "summaries", ("chunk_id",))

    def summary_provenance(self) -> pd.DataFrame:
        from pmrag.represent.summarize import summary_provenance

        self.build_summaries()
        return summary_provenance(self.engine)

    def embedding_template(self):
        from pmrag.represent.representations import EmbeddingTextTemplate

        section = self.params.section("representations")
        return EmbeddingTextTemplate.from_prompts(section["prompts"], section["excerpt_chars"])

    def representations(self) -> pd.DataFrame:
        """chunk_id, raw_text, summary, summary_status, embedding_text for every chunk (in chunk order)."""
        from pmrag.represent.representations import build_representations

        return build_representations(self.chunks(), self.summaries(), self.embedding_template())

    def representation_lengths(self) -> pd.DataFrame:
        from pmrag.represent.representations import length_table

        return length_table(self.representations())

    def example_chunk(self) -> pd.Series:
        """The first primary-gold chunk of the first question: a synthetic example in all three forms."""
        qrels = self.qrels()
        primary = qrels[qrels["relevance"] == 2].sort_values(["question_id", "chunk_id"])
        reps = self.representations().set_index("chunk_id")
        return reps.loc[primary["chunk_id"].iloc[0]] if len(primary) else reps.iloc[0]

    # -- stage: vectors -------------------------------------------------------------------------
    def embedding_params(self):
        from pmrag.represent.embed import EmbeddingParams

        return EmbeddingParams.from_section(self.params.section("embedding"), allow_remote=self.params.data["allow_remote"])

    def embedding_cache(self):
        """The content-addressed vector cache shared by every run (``cache_dir``)."""
        from pmrag.represent.embed import EmbeddingCache

        folder = Path(self.params.data["cache_dir"])
        folder.mkdir(parents=True, exist_ok=True)
        return EmbeddingCache(folder / "embeddings.sqlite")

    def build_vectors(self, *, progress: bool = False) -> dict[str, str]:
        """Embed each representation named in ``embedding.representations``; returns matrix paths by representation.

        Every text goes through the cache, so a rerun embeds nothing; the stage key skips even the lookups
        when neither the texts nor the embedding params changed.
        """
        from pmrag.represent.embed import embed_representation, make_embedder

        params = self.embedding_params()
        reps = self.representations()
        wanted = self.params.data["embedding"]["representations"]
        out_dir = self.run_dir / "vectors"
        embedder = None
        paths = {}
        for name in wanted:
            texts = list(zip(reps["chunk_id"], reps[name]))
            key = _hash({"texts": hashlib.sha256("\x1e".join(f"{c}\x1f{t}" for c, t in texts).encode()).hexdigest(),
                         "params": asdict(params)})
            cached = get_stage(self.engine, f"vectors:{name}")
            if cached and cached[0] == key and Path(cached[1]["path"]).is_file():
                paths[name] = cached[1]["path"]
                continue
            embedder = embedder or make_embedder(params)
            with self.embedding_cache() as cache:
                path = embed_representation(self.engine, cache, embedder, name, texts, out_dir, params, progress=progress)
            set_stage(self.engine, f"vectors:{name}", key, {"path": str(path), "model_id": embedder.model_id})
            paths[name] = str(path)
        return paths

    def vectors(self, representation: str):
        """``(matrix, chunk_ids)`` of one representation, checked against the texts that were sent."""
        self.build_vectors()
        return self._load_vectors(representation)

    def _load_vectors(self, representation: str):
        """:meth:`vectors` for callers that have just run :meth:`build_vectors` themselves."""
        from pmrag.represent.embed import load_vectors

        info = get_stage(self.engine, f"vectors:{representation}")
        if info is None:
            raise KeyError(f"no vectors for {representation!r}; embedding.representations lists "
                           f"{self.params.data['embedding']['representations']}")
        return load_vectors(self.engine, self.run_dir / "vectors", representation, info[1]["model_id"])

    def vector_summary(self) -> pd.DataFrame:
        """Per embedded representation: model, rows, dimension, and the length of the text actually sent."""
        self.build_vectors()
        rows = []
        inputs = store.read_table(self.engine, "embedding_inputs")
        for name in self.params.data["embedding"]["representations"]:
            matrix, _ = self._load_vectors(name)
            mine = inputs[inputs["representation"] == name]
            sent = mine["text_sent"].str.len()
            rows.append({
                "representation": name, "model": get_stage(self.engine, f"vectors:{name}")[1]["model_id"],
                "rows": matrix.shape[0], "dim": matrix.shape[1], "dtype": str(matrix.dtype),
                "sent_chars_mean": round(float(sent.mean()), 1), "sent_chars_max": int(sent.max()),
                "shortened": int((mine["source_chars"] > sent).sum()),
            })
        return pd.DataFrame(rows)

    def query_vectors(self, *, progress: bool = False) -> tuple[np.ndarray, list[str]]:
        """Question vectors, embedded verbatim as e5/OpenAI queries (§5.2), cached by (text, model)."""
        from pmrag.represent.embed import embed_with_cache, make_embedder

        questions = self.questions()
        with self.embedding_cache() as cache:
            vectors = embed_with_cache(make_embedder(self.embedding_params()), questions["text"].tolist(), "query",
                                       cache, progress=progress)
        return vectors, questions["question_id"].tolist()

    # -- stage: single-retriever runs and metrics -----------------------------------------------
    def retrievers(self) -> list[str]:
        """BM25 over every representation, vectors over every embedded one (the paper's names)."""
        from pmrag.retrieve.retrieval import REPRESENTATIONS, retriever_name

        embedded = self.params.data["embedding"]["representations"]
        return ([retriever_name(r, "bm25") for r in REPRESENTATIONS]
                + [retriever_name(r, "vector") for r in REPRESENTATIONS if r in embedded])

    def evaluable_questions(self) -> pd.DataFrame:
        """Questions with at least one primary-gold chunk (the paper's retention rule), in ID order."""
        from pmrag.chunking.stats import primary_gold_questions

        questions = self.questions()
        return questions[questions["question_id"].isin(primary_gold_questions(self.qrels()))].reset_index(drop=True)

    def build_runs(self) -> dict[str, str]:
        """Rank every chunk for every evaluable question with each single retriever; TREC files under runs/."""
        from pmrag.evaluate import trec
        from pmrag.retrieve.retrieval import bm25_rankings, dense_rankings

        section = self.params.section("retrieval")
        reps = self.representations()
        chunks = self.chunks().set_index("chunk_id").loc[reps["chunk_id"]]
        questions = self.evaluable_questions()
        self.build_vectors()
        embedded = self.params.data["embedding"]["representations"]
        key = _hash({
            "texts": hashlib.sha256("\x1e".join(reps["embedding_text"] + "\x1f" + reps["summary"]).encode()).hexdigest(),
            "chunks": get_stage(self.engine, "chunks")[0], "questions": questions[["question_id", "text"]].values.tolist(),
            "vectors": {r: get_stage(self.engine, f"vectors:{r}")[0] for r in embedded},
            "embedding": asdict(self.embedding_params()), "retrieval": section,
        })
        cached = get_stage(self.engine, "runs")
        run_dir = self.run_dir / "runs"
        if cached and cached[0] == key and all(Path(p).is_file() for p in cached[1]["files"].values()):
            return cached[1]["files"]
        chunk_ids = reps["chunk_id"].to_numpy()
        start_times = pd.to_datetime(chunks["start_at"]).to_numpy()
        qids, qtexts = questions["question_id"].tolist(), questions["text"].tolist()
        query_matrix = None
        frames = {}
        for retriever in self.retrievers():
            representation, kind = retriever.rsplit("_", 1)
            if kind == "bm25":
                frames[retriever] = bm25_rankings(reps[representation].tolist(), qtexts, qids, chunk_ids, start_times,
                                                  section["depth"], section["k1"], section["b"])
            else:
                if query_matrix is None:
                    vectors, all_qids = self.query_vectors()
                    query_matrix = vectors[[all_qids.index(q) for q in qids]]
                matrix, order = self._load_vectors(representation)
                if list(order) != list(chunk_ids):
                    raise RuntimeError(f"vectors of {representation} are not in chunk order; rebuild the vector stage")
                frames[retriever] = dense_rankings(matrix, query_matrix, qids, chunk_ids, start_times, section["depth"])
        self._clear(store.rankings)
        files = {}
        with self.engine.begin() as conn:
            for retriever, frame in frames.items():
                conn.execute(store.insert(store.rankings), frame.assign(retriever=retriever).to_dict("records"))
                files[retriever] = str(run_dir / f"{retriever}.trec")
                run_dir.mkdir(parents=True, exist_ok=True)
                trec.write_run(files[retriever], frame, tag=retriever, depth=section["depth"], scores="rank")
        trec.write_qrels(self.run_dir / "qrels.trec", self.qrels()[lambda q: q["question_id"].isin(qids)])
        set_stage(self.engine, "runs", key, {"files": files})
        return files

    def rankings(self) -> pd.DataFrame:
        self.build_runs()
        return store.read_table(self.engine, "rankings", ("retriever", "question_id", "rank"))

    def per_question_metrics(self) -> pd.DataFrame:
        """One row per (retriever, question): Recall/MRR/nDCG at every k of ``retrieval.ks``."""
        from pmrag.evaluate.metrics import per_question_metrics

        rankings, questions = self.rankings(), self.evaluable_questions()
        qrels = self.qrels()[lambda q: q["question_id"].isin(questions["question_id"])]
        types = questions.set_index("question_id")["type"]
        frames = []
        for retriever, frame in rankings.groupby("retriever", sort=False):
            metrics = per_question_metrics(frame, qrels, ks=self.metric_ks())
            metrics = metrics.reset_index()
            metrics.insert(0, "retriever", retriever)
            metrics.insert(2, "question_type", metrics["question_id"].map(types))
            frames.append(metrics)
        table = pd.concat(frames, ignore_index=True)
        order = {r: i for i, r in enumerate(self.retrievers())}
        table = table.sort_values(["retriever", "question_id"], key=lambda s: s.map(order) if s.name == "retriever" else s)
        return table.reset_index(drop=True)

    def metric_ks(self) -> tuple[int, ...]:
        """Cut-offs scored per question: ``retrieval.ks`` plus the analysis's failure and recovery cut-offs."""
        analysis = self.params.data["analysis"]
        return tuple(sorted({*self.params.data["retrieval"]["ks"], analysis["failure_k"], *analysis["recovery_ks"]}))

    def bootstrap_params(self):
        from pmrag.evaluate.bootstrap import BootstrapParams

        return BootstrapParams(**self.params.section("bootstrap"))

    # -- stage: hybrid sweep ----------------------------------------------------------------------
    def hybrid_pairings(self) -> list[tuple[str, str]]:
        """The configured (BM25, vector) pairings whose vector retriever exists in this study."""
        available = set(self.retrievers())
        return [(b, v) for b, v in self.params.data["hybrid"]["pairings"] if b in available and v in available]

    def hybrid_betas(self) -> np.ndarray:
        step = self.params.data["hybrid"]["beta_step"]
        return np.round(np.arange(0.0, 1.0 + step / 2, step), 10)

    def _rankings_by_retriever(self) -> dict[str, pd.DataFrame]:
        return {name: frame for name, frame in self.rankings().groupby("retriever", sort=False)}

    def _evaluable_qrels(self) -> pd.DataFrame:
        return self.qrels()[lambda q: q["question_id"].isin(self.evaluable_questions()["question_id"])]

    def hybrid_sweep(self) -> pd.DataFrame:
        """Per-question Recall/MRR/nDCG@5 of every (pairing, beta): bm25, vector, beta, question_id, metrics."""
        from pmrag.retrieve.fusion import sweep

        runs, qrels = self._rankings_by_retriever(), self._evaluable_qrels()
        frames = []
        for bm25, vector in self.hybrid_pairings():
            per_question = sweep(runs[bm25], runs[vector], qrels, betas=self.hybrid_betas(), k=5)
            frames.append(per_question.assign(bm25=bm25, vector=vector))
        table = pd.concat(frames, ignore_index=True)
        return table[["bm25", "vector", "beta", "question_id", "recall@5", "mrr@5", "ndcg@5"]]

    def hybrid_sweep_macro(self, per_question: pd.DataFrame | None = None) -> pd.DataFrame:
        """One row per (bm25, vector, beta) with macro Recall/MRR/nDCG@5."""
        per_question = self.hybrid_sweep() if per_question is None else per_question
        return (per_question.groupby(["bm25", "vector", "beta"], sort=False)[["recall@5", "mrr@5", "ndcg@5"]]
                .mean().reset_index())

    def best_hybrids(self, macro: pd.DataFrame | None = None) -> pd.DataFrame:
        """The selected beta of each pairing (max Recall@5; ties: see :func:`pmrag.fusion.select_best`)."""
        from pmrag.retrieve.fusion import select_best

        macro = self.hybrid_sweep_macro() if macro is None else macro
        rows = [select_best(group) for _, group in macro.groupby(["bm25", "vector"], sort=False)]
        return pd.DataFrame(rows).sort_values("recall@5", ascending=False, kind="stable").reset_index(drop=True)

    @staticmethod
    def hybrid_name(bm25: str, vector: str, beta: float) -> str:
        """``hybrid:embedding_text_bm25+embedding_text_vector@0.45`` — pairing and beta readable from the name."""
        return f"hybrid:{bm25}+{vector}@{beta:.2f}"

    def hybrid_metrics(self, bm25: str, vector: str, beta: float, *, write_run: bool = False) -> pd.DataFrame:
        """Per-question metrics (every k of :meth:`metric_ks`) of one fused configuration, named by
        :meth:`hybrid_name`; with ``write_run`` its TREC run goes under ``runs/``."""
        return self._fused_metrics([(bm25, vector, beta)], write_run=write_run)

    def _fused_metrics(self, configurations, *, write_run: bool) -> pd.DataFrame:
        """:meth:`hybrid_metrics` of several ``(bm25, vector, beta)``, reading rankings and qrels once."""
        from pmrag.evaluate import trec
        from pmrag.retrieve.fusion import minmax_fuse
        from pmrag.evaluate.metrics import per_question_metrics

        runs, qrels = self._rankings_by_retriever(), self._evaluable_qrels()
        types = self.evaluable_questions().set_index("question_id")["type"]
        frames = []
        for bm25, vector, beta in configurations:
            missing = [r for r in (bm25, vector) if r not in runs]
            if missing:
                raise ValueError(f"hybrid {bm25} + {vector}: no ranking for {', '.join(missing)}; known: {', '.join(runs)}")
            name = self.hybrid_name(bm25, vector, beta)
            fused = minmax_fuse(runs[bm25], runs[vector], beta)
            if write_run:
                path = self.path("runs", f"hybrid__{bm25}+{vector}__beta{beta:.2f}.trec")
                trec.write_run(path, fused, tag=name.replace(":", "_"), depth=len(fused), scores="rank")
            metrics = per_question_metrics(fused, qrels, ks=self.metric_ks()).reset_index()
            metrics.insert(0, "retriever", name)
            metrics.insert(2, "question_type", metrics["question_id"].map(types))
            frames.append(metrics)
        return pd.concat(frames, ignore_index=True)

    def hybrid_runs(self, best: pd.DataFrame | None = None) -> pd.DataFrame:
        """Fuse each selected configuration, write its TREC run, and return its per-question metrics rows."""
        best = self.best_hybrids() if best is None else best
        return self._fused_metrics([(r.bm25, r.vector, r.beta) for r in best.itertuples(index=False)], write_run=True)

    def selected_hybrid(self, best: pd.DataFrame | None = None) -> pd.Series:
        """The best hybrid over all pairings: the selected β of each pairing (:meth:`best_hybrids`) ranked by
        Recall@5, then nDCG@5, then MRR@5 (descending); a remaining tie keeps the configured pairing order.

        It is chosen on the same questions it is evaluated on: every interval about it is conditional on
        this selection (§4.4, §9.1).
        """
        best = self.best_hybrids() if best is None else best
        order = {tuple(p): i for i, p in enumerate(self.hybrid_pairings())}
        ranked = best.assign(_order=[order[(b, v)] for b, v in zip(best["bm25"], best["vector"])])
        ranked = ranked.sort_values(["recall@5", "ndcg@5", "mrr@5", "_order"], ascending=[False, False, False, True],
                                    kind="stable")
        return ranked.drop(columns="_order").iloc[0]

    def diagnostic_hybrid(self) -> tuple[str, str, float]:
        """``(bm25, vector, beta)`` of the paper's auxiliary summary hybrid (params ``analysis.diagnostic_hybrid``)."""
        bm25, vector, beta = self.params.data["analysis"]["diagnostic_hybrid"]
        return str(bm25), str(vector), float(beta)

    def question_types(self) -> list[str]:
        """Question types of the evaluable questions: the paper's three first (when present), then the rest."""
        present = list(dict.fromkeys(self.evaluable_questions()["type"].astype(str)))
        paper = [t for t in ("named_entity", "contextual", "aggregate") if t in present]
        return paper + sorted(t for t in present if t not in paper)

    def analysis_metrics(self) -> pd.DataFrame:
        """Per-question metrics of every single retriever, every pairing's selected hybrid and the diagnostic
        hybrid (once, if it is not already one of the selected)."""
        best = self.best_hybrids()
        frames = [self.per_question_metrics(), self.hybrid_runs(best)]
        diagnostic = self.hybrid_name(*self.diagnostic_hybrid())
        if diagnostic not in set(frames[1]["retriever"]):
            frames.append(self.hybrid_metrics(*self.diagnostic_hybrid()))
        return pd.concat(frames, ignore_index=True)

    def chunk_speakers(self) -> pd.Series:
        """``chunk_id → "A, B"``: the distinct senders of each chunk in order of first appearance."""
        self.build_chunks()
        with self.engine.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT cm.chunk_id, m.sender FROM chunk_messages cm JOIN messages m ON m.message_id = cm.message_id "
                "ORDER BY cm.chunk_id, cm.position"
            ).fetchall()
        speakers: dict[str, dict[str, None]] = {}
        for chunk, sender in rows:
            speakers.setdefault(chunk, {})[sender] = None
        return pd.Series({chunk: ", ".join(names) for chunk, names in speakers.items()}, name="speakers")

    def candidate_ceilings(self) -> pd.DataFrame:
        """Macro Recall@depth on primary gold of each component list and of each pair's oracle union (§5.3)."""
        from pmrag.retrieve.fusion import candidate_ceiling, oracle_union_ceiling

        runs, qrels = self._rankings_by_retriever(), self._evaluable_qrels()
        depth = self.params.data["retrieval"]["depth"]
        return pd.DataFrame([
            {"bm25": b, "vector": v, f"bm25 recall@{depth}": candidate_ceiling(runs[b], qrels, depth),
             f"vector recall@{depth}": candidate_ceiling(runs[v], qrels, depth),
             "oracle union recall": oracle_union_ceiling(runs[b], runs[v], qrels)}
            for b, v in self.hybrid_pairings()
        ])
