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

import pandas as pd

from pmrag import store
from pmrag.chunking import ChunkingParams, chunk_source
from pmrag.ingest import IngestOptions, read_source
from pmrag.params import Params, load_params

SYNTHETIC_DIR = "data"


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
        cached = store.get_stage(self.engine, "synthetic")
        if cached and cached[0] == key and manifest_path.is_file():
            return json.loads(manifest_path.read_text(encoding="utf-8"))
        manifest = generate_corpus(corpus_dir, **wanted)
        store.set_stage(self.engine, "synthetic", key, {})
        return manifest

    # -- stage: ingest --------------------------------------------------------------------------
    def ingest(self) -> pd.DataFrame:
        """Ingest every input file (once); returns the per-file reconciliation."""
        dataset = self.params.section("dataset")
        files, questions = self.input_files()
        hashes = {str(p): store.file_sha256(p) for p in files + ([questions] if questions else [])}
        options = IngestOptions(unknown_time_offset=dataset["unknown_time_offset"])
        key = _hash({"files": hashes, "format": dataset["format"], "permissive": dataset["permissive"], "options": asdict(options)})
        cached = store.get_stage(self.engine, "ingest")
        if cached and cached[0] == key:
            return pd.DataFrame(cached[1]["reports"])
        self._clear(store.messages, store.questions, store.question_evidence, store.files, store.rejections)
        reports = []
        for path in files:
            batch = read_source(path, dataset["format"], permissive=dataset["permissive"], options=options)
            reports.append(asdict(store.store_batch(self.engine, batch, hashes[str(path)])))
        if questions is not None:
            batch = read_source(questions, "questions-json", permissive=dataset["permissive"], options=options)
            reports.append(asdict(store.store_batch(self.engine, batch, hashes[str(questions)])))
        for report in reports:
            report["path"] = self._display_path(report["path"])
        store.set_stage(self.engine, "ingest", key, {"reports": reports})
        store.set_stage(self.engine, "chunks", "", {})
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
        key = _hash({"ingest": store.get_stage(self.engine, "ingest")[0], "chunking": asdict(chunking)})
        cached = store.get_stage(self.engine, "chunks")
        if cached and cached[0] == key:
            return cached[1]
        all_chunks = []
        for source, source_messages in store.load_chunk_messages(self.engine).items():
            all_chunks += chunk_source(source, source_messages, chunking)
        store.replace_chunks(self.engine, all_chunks)
        store.derive_qrels(self.engine)
        info = {"n_chunks": len(all_chunks)}
        store.set_stage(self.engine, "chunks", key, info)
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
        from pmrag.chunking import sort_messages, split_sessions

        gap = self.chunking_params().session_gap_minutes
        self.ingest()
        return [
            len(session)
            for _, msgs in sorted(store.load_chunk_messages(self.engine).items())
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
