"""Study parameters: one YAML file per study, validated on load.

Every relative path in a params file is resolved against the directory that holds the file.  An unknown
key, a value of the wrong type or a missing input file is a :class:`~pmrag.errors.ParamsError` whose
one-line message names the file and the dotted key (or the path).
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pmrag.core.errors import ParamsError


@dataclass(frozen=True)
class Field:
    type: type | tuple[type, ...]
    default: Any
    help: str = ""
    choices: tuple | None = None
    minimum: float | None = None


def _schema() -> dict:
    return {
        "run": Field(str, None, "run name: outputs go to <outputs_dir>/<run>/"),
        "description": Field(str, ""),
        "outputs_dir": Field(str, "../outputs", "where run directories are created"),
        "notebooks_dir": Field(str, "../notebooks", "the numbered notebooks the study executes"),
        "dataset": {
            "synthetic": {
                "enabled": Field(bool, False, "generate the embedded demo corpus and ingest it like user data"),
                "seed": Field(int, 20240410),
                "n_messages": Field(int, 12000, minimum=1),
                "n_questions": Field(int, 100, minimum=1),
            },
            "inputs": Field(list, [], "files to ingest"),
            "questions": Field((str, type(None)), None, "a questions JSON file"),
            "format": Field(str, "auto", choices=("auto", "line-json", "line-txt", "locomo")),
            "permissive": Field(bool, False, "record and skip malformed records instead of stopping"),
            "unknown_time_offset": Field(str, "date_order", choices=("date_order", "source_order")),
        },
        "allow_remote": Field(bool, False, "let backends send chat text off this machine (loopback servers never need it)"),
        "cache_dir": Field(str, "../outputs/.cache", "content-addressed caches shared by every run (embeddings)"),
        "representations": {
            "prompts": Field(str, "ja", "prompt set: ja, en, or a folder with the same file names"),
            "excerpt_chars": Field(int, 4000, minimum=1),
        },
        "summarizer": {
            "backend": Field(str, "extractive", choices=("extractive", "openai")),
            "model": Field(str, "gpt-4o-mini"),
            "max_output_tokens": Field(int, 700, minimum=1),
            "timeout_s": Field((int, float), 90, minimum=0),
            "interval_s": Field((int, float), 0.2, minimum=0),
            "max_input_chars": Field(int, 7000, minimum=1),
            "base_url": Field((str, type(None)), None),
            "failure_policy": Field(str, "stop_on_first_error", choices=("stop_on_first_error", "retry")),
            "max_retries": Field(int, 3, minimum=0),
        },
        "embedding": {
            "backend": Field(str, "e5-local", choices=("e5-local", "openai")),
            "model": Field((str, type(None)), None, "default: multilingual-e5-small-q4 / text-embedding-3-small"),
            "query_model": Field((str, type(None)), None, "default: the same as model"),
            "base_url": Field((str, type(None)), None),
            "batch_size": Field(int, 64, minimum=1),
            "max_chars": Field(int, 2000, minimum=1),
            "head_fraction": Field((int, float), 0.5, minimum=0),
            "representations": Field(list, ["raw_text", "summary", "embedding_text"]),
        },
        "retrieval": {
            "depth": Field(int, 200, "ranked list length per question (TREC runs, hybrid candidates)", minimum=1),
            "k1": Field((int, float), 1.2, minimum=0),
            "b": Field((int, float), 0.75, minimum=0),
            "ks": Field(list, [5, 10, 20, 200], "cut-offs for Recall/MRR/nDCG"),
        },
        "hybrid": {
            "pairings": Field(list, [
                ["summary_bm25", "summary_vector"], ["summary_bm25", "embedding_text_vector"],
                ["raw_text_bm25", "summary_vector"], ["raw_text_bm25", "embedding_text_vector"],
                ["embedding_text_bm25", "summary_vector"], ["embedding_text_bm25", "embedding_text_vector"],
            ], "BM25 × vector pairings to fuse (§5.3's six by default)"),
            "beta_step": Field(float, 0.05, "beta from 0 to 1 in this step", minimum=0.001),
        },
        "bootstrap": {
            "n_resamples": Field(int, 5000, minimum=1),
            "seed": Field(int, 12345, minimum=0),
            "confidence": Field(float, 0.95),
        },
        "analysis": {
            "reference_retriever": Field(str, "embedding_text_bm25", "Table 5: the single retriever the best hybrid is compared with"),
            "diagnostic_hybrid": Field(list, ["summary_bm25", "summary_vector", 0.5],
                                       "Tables 5 and 8, Figure 6: [bm25, vector, beta] of the paper's summary hybrid"),
            "failure_k": Field(int, 5, "a question fails when no primary gold is in this Top-K", minimum=1),
            "recovery_ks": Field(list, [10, 20], "wider cut-offs of the same ranking for Top-K recoverability"),
            "aggregate_type": Field(str, "aggregate", "the question type labelled aggregate_failure"),
            "min_primary_gold": Field(int, 3, "non-aggregate failures with this many primary-gold chunks or more",
                                      minimum=1),
            "public_question_ids": Field(str, "pseudonym", "question IDs in public/: pseudonym (q_ + SHA-1 prefix) or original",
                                         choices=("pseudonym", "original")),
        },
        "chunking": {
            "session_gap_minutes": Field((int, float), 180, minimum=0),
            "window_size": Field(int, 42, minimum=1),
            "stride": Field(int, 36, minimum=1),
            "max_summary_input_chars": Field(int, 5000, minimum=1),
            "min_window_messages": Field(int, 1, minimum=1),
            "trim_policy": Field(str, "fixed", choices=("fixed", "resume")),
        },
    }


_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "a list", type(None): "null"}


def _type_name(expected) -> str:
    types = expected if isinstance(expected, tuple) else (expected,)
    return " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)


def _is_instance(value, expected) -> bool:
    types = expected if isinstance(expected, tuple) else (expected,)
    if isinstance(value, bool) and bool not in types:
        return False
    return isinstance(value, types)


def _validate(raw: dict, schema: dict, prefix: str, origin: str) -> dict:
    if not isinstance(raw, dict):
        raise ParamsError(f"{origin}: key '{prefix.rstrip('.') or '(top level)'}' must be a mapping, got {raw!r}")
    unknown = sorted(set(raw) - set(schema))
    if unknown:
        raise ParamsError(
            f"{origin}: unknown key '{prefix}{unknown[0]}' (expected one of: {', '.join(sorted(schema))})"
        )
    out = {}
    for key, spec in schema.items():
        dotted = f"{prefix}{key}"
        if isinstance(spec, dict):
            out[key] = _validate(raw.get(key) or {}, spec, f"{dotted}.", origin)
            continue
        value = raw.get(key, copy.deepcopy(spec.default))
        if value is None and spec.default is None and not _is_instance(None, spec.type):
            raise ParamsError(f"{origin}: missing key '{dotted}' ({_type_name(spec.type)})")
        if not _is_instance(value, spec.type):
            raise ParamsError(f"{origin}: key '{dotted}' must be {_type_name(spec.type)}, got {value!r}")
        if spec.choices is not None and value not in spec.choices:
            raise ParamsError(f"{origin}: key '{dotted}' must be one of {', '.join(map(str, spec.choices))}, got {value!r}")
        if spec.minimum is not None and value < spec.minimum:
            raise ParamsError(f"{origin}: key '{dotted}' must be ≥ {spec.minimum}, got {value!r}")
        out[key] = value
    return out


@dataclass(frozen=True)
class Params:
    """Validated params.  ``data`` holds every key (defaults filled in); paths are absolute."""

    path: Path
    data: dict

    @property
    def run(self) -> str:
        return self.data["run"]

    @property
    def run_dir(self) -> Path:
        return Path(self.data["outputs_dir"]) / self.run

    @property
    def notebooks_dir(self) -> Path:
        return Path(self.data["notebooks_dir"])

    def section(self, name: str) -> dict:
        return copy.deepcopy(self.data[name])

    def digest(self, *sections: str) -> str:
        """A stable hash of the named sections, for stage cache keys."""
        payload = json.dumps({s: self.data[s] for s in sections}, sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()


def _resolve(base: Path, value: str) -> str:
    return str((base / Path(value).expanduser()).resolve())


def load_params(path) -> Params:
    """Read and validate a params YAML file."""
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"params file not found: {path}")
    origin = str(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark else ""
        raise ParamsError(f"{origin}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    data = _validate(raw, _schema(), "", origin)
    if not data["run"].replace("-", "").replace("_", "").isalnum():
        raise ParamsError(f"{origin}: key 'run' must be a simple name (letters, digits, - and _), got {data['run']!r}")
    base = path.resolve().parent
    for key in ("outputs_dir", "notebooks_dir", "cache_dir"):
        data[key] = _resolve(base, data[key])
    dataset = data["dataset"]
    inputs = []
    for index, item in enumerate(dataset["inputs"]):
        if not isinstance(item, str):
            raise ParamsError(f"{origin}: key 'dataset.inputs[{index}]' must be a path string, got {item!r}")
        resolved = _resolve(base, item)
        if not Path(resolved).is_file():
            raise ParamsError(f"{origin}: key 'dataset.inputs[{index}]': file not found: {resolved}")
        inputs.append(resolved)
    dataset["inputs"] = inputs
    if dataset["questions"] is not None:
        dataset["questions"] = _resolve(base, dataset["questions"])
        if not Path(dataset["questions"]).is_file():
            raise ParamsError(f"{origin}: key 'dataset.questions': file not found: {dataset['questions']}")
    if not dataset["synthetic"]["enabled"] and not inputs:
        raise ParamsError(f"{origin}: key 'dataset': give 'inputs' (files to ingest) or set 'synthetic.enabled: true'")
    unknown = [r for r in data["embedding"]["representations"] if r not in ("raw_text", "summary", "embedding_text")]
    if unknown:
        raise ParamsError(f"{origin}: key 'embedding.representations': unknown representation {unknown[0]!r} "
                          "(expected raw_text, summary, embedding_text)")
    if data["embedding"]["head_fraction"] > 1:
        raise ParamsError(f"{origin}: key 'embedding.head_fraction' must be ≤ 1, got {data['embedding']['head_fraction']}")
    prompts = data["representations"]["prompts"]
    if prompts not in ("ja", "en"):
        data["representations"]["prompts"] = _resolve(base, prompts)
        if not Path(data["representations"]["prompts"]).is_dir():
            raise ParamsError(f"{origin}: key 'representations.prompts': folder not found: {data['representations']['prompts']}")
    for index, pair in enumerate(data["hybrid"]["pairings"]):
        if (not isinstance(pair, list) or len(pair) != 2 or not str(pair[0]).endswith("_bm25")
                or not str(pair[1]).endswith("_vector")):
            raise ParamsError(f"{origin}: key 'hybrid.pairings[{index}]' must be [<representation>_bm25, "
                              f"<representation>_vector], got {pair!r}")
    analysis = data["analysis"]
    diagnostic = analysis["diagnostic_hybrid"]
    if (len(diagnostic) != 3 or not str(diagnostic[0]).endswith("_bm25") or not str(diagnostic[1]).endswith("_vector")
            or isinstance(diagnostic[2], bool) or not isinstance(diagnostic[2], (int, float)) or not 0 <= diagnostic[2] <= 1):
        raise ParamsError(f"{origin}: key 'analysis.diagnostic_hybrid' must be [<representation>_bm25, "
                          f"<representation>_vector, beta in [0, 1]], got {diagnostic!r}")
    ks = data["retrieval"]["ks"]
    for key, values in (("retrieval.ks", ks), ("analysis.recovery_ks", analysis["recovery_ks"])):
        if not values or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in values):
            raise ParamsError(f"{origin}: key '{key}' must be a list of positive integers, got {values!r}")
    chunking = data["chunking"]
    if chunking["stride"] > chunking["window_size"]:
        raise ParamsError(f"{origin}: key 'chunking.stride' must be ≤ chunking.window_size ({chunking['window_size']}), got {chunking['stride']}")
    if chunking["min_window_messages"] > chunking["window_size"]:
        raise ParamsError(f"{origin}: key 'chunking.min_window_messages' must be ≤ chunking.window_size")
    return Params(path=path.resolve(), data=data)


def dataclass_from_mapping(cls, values: dict, what: str):
    """``cls(**values)`` for a settings dataclass, naming unknown keys in a ``ValueError`` first."""
    from dataclasses import fields

    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown {what} setting(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return cls(**values)
