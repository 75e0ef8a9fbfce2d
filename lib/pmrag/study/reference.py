"""``docs/params.md``: the params reference, rendered from the schema (:mod:`pmrag.core.params`).

``python -m pmrag.study.reference`` (``make docs``) writes it; a test keeps the committed page equal to
:func:`params_reference`, so the page can never disagree with the keys a study actually accepts.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel

from pmrag.core.params import StudyParams, reference_rows

REPO = Path(__file__).resolve().parents[3]
DOCS_PATH = REPO / "docs" / "params.md"
TOP_LEVEL = "top level"
REQUIRED = "(required)"   # reference_rows' default of a key without one

INTRO = """\
# Params reference

Generated from `lib/pmrag/core/params.py` by `python -m pmrag.study.reference` (`make docs`); do not edit
this page by hand: change the schema and regenerate it.

A study is one YAML file (`params/demo.yaml` lists every key).  Only `run` is required, plus either
`dataset.inputs` or `dataset.synthetic.enabled: true`; every other key has the default below.  Relative
paths are resolved against the folder that holds the params file.  Values are checked on load: an unknown
key, a wrong type (`5.0` is not an integer), NaN, a value out of range or a retriever the study does not
run stops with a one-line error naming the file and the dotted key.

**default** is the value used when a key is left out; **paper** is the value the paper states (blank where
it states none).
"""

COLUMNS = ("key", "type", "default", "paper", "description")


def _sections(model: type[BaseModel] = StudyParams, prefix: str = "") -> Iterator[str]:
    """Section prefixes in reading order: a section's own keys before its subsections ("" = the top level)."""
    yield prefix
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _sections(annotation, f"{prefix}{name}.")


_PLACEHOLDERS = re.compile(r"\S*<\w+>\S*")   # <outputs_dir>/<run>/: code, so that markdown keeps the <…>


def _cell(text: str, code: bool = False) -> str:
    if not text:
        return ""
    text = text.replace("|", "\\|")
    if code:
        return "required" if text == REQUIRED else f"`{text}`"
    return _PLACEHOLDERS.sub(lambda m: f"`{m.group(0)}`", text)


def params_reference() -> str:
    """The whole ``docs/params.md`` page (markdown, one table per section)."""
    rows: dict[str, list[dict]] = {}
    for row in reference_rows():
        section, _, _ = row["key"].rpartition(".")
        rows.setdefault(section, []).append(row)
    parts = [INTRO]
    for prefix in _sections():
        section = prefix.rstrip(".")
        if section not in rows:
            continue
        depth = section.count(".")
        title = TOP_LEVEL if not section else f"`{section}`"
        parts.append(f"\n{'#' * (2 + depth)} {title}\n\n")
        lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
        for row in rows[section]:
            cells = (_cell(row["key"], code=True), _cell(row["type"]), _cell(row["default"], code=True),
                     _cell(row["paper"], code=True), _cell(row["description"]))
            lines.append("| " + " | ".join(cells) + " |")
        parts.append("\n".join(lines) + "\n")
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    path = Path(argv[0]) if argv else DOCS_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(params_reference(), encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
