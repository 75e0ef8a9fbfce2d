"""Key presses from JupyterLab to Python: a small focusable pad, an anywidget.

A Jupyter widget never sees key presses: JupyterLab's notebook takes them as its own shortcuts (``1`` turns
the cell into a heading, ``0 0`` restarts the kernel).  Of the ways to get them, this takes anywidget
(maintained, on PyPI and conda-forge, no build step: the front-end is the ES module below):

* ipyevents takes keys only while the mouse pointer is over the widget, and then every key, so typing a note
  under the pointer would grade;
* a ``Text`` box observed per keystroke drops or merges keys typed faster than the kernel's round trip and
  leaves typed characters to clean up.

The pad listens on ``window`` in the capture phase, so it sees a key before any JupyterLab shortcut, and only
while the pad itself has the focus (click it; it also takes the focus when first shown and when Python calls
``focus()``): a key of ``watched`` is then stopped there and sent to Python as one ``{"key": …}`` message; any
other key, and every key while the focus is elsewhere (the note box, another cell), goes on as usual.  The
browser test checks both: graded by keys, the notebook's cell is still a code cell.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache

CSS_KEYPAD = "pmrag-grading-keys"

_ESM = r"""
function render({ model, el }) {
  const pad = document.createElement("div");
  pad.tabIndex = 0;
  pad.className = "pmrag-grading-keys-pad";
  pad.setAttribute("role", "application");
  const label = () => { pad.textContent = model.get("label"); };
  label();
  model.on("change:label", label);
  const onKey = (event) => {
    if (document.activeElement !== pad || event.ctrlKey || event.metaKey || event.altKey) return;
    if (!model.get("watched").includes(event.key)) return;
    event.preventDefault();
    event.stopPropagation();
    event.stopImmediatePropagation();
    if (event.type === "keydown" && !event.repeat) model.send({ key: event.key });
  };
  for (const type of ["keydown", "keypress", "keyup"]) window.addEventListener(type, onKey, true);
  pad.addEventListener("click", () => pad.focus());
  model.on("msg:custom", (message) => { if (message && message.focus) pad.focus(); });
  el.appendChild(pad);
  if (model.get("autofocus")) setTimeout(() => pad.focus(), 0);
  return () => { for (const type of ["keydown", "keypress", "keyup"]) window.removeEventListener(type, onKey, true); };
}
export default { render };
"""

_CSS = """
.pmrag-grading-keys-pad { border: 2px dashed #9aa0a6; border-radius: 4px; padding: 6px 10px; cursor: pointer;
  color: #444; font-size: 13px; user-select: none; }
.pmrag-grading-keys-pad:focus { border: 2px solid #1a73e8; background: #e8f0fe; color: #174ea6; outline: none; }
"""


@cache
def keypad_class() -> type:
    """The :class:`KeyPad` widget class (built on first use, so importing this module loads no widget library)."""
    import anywidget
    import traitlets

    class KeyPad(anywidget.AnyWidget):
        """A focusable pad that sends the keys of ``watched`` pressed while it has the focus to ``on_key``."""

        _esm = _ESM
        _css = _CSS
        watched = traitlets.List(traitlets.Unicode()).tag(sync=True)
        label = traitlets.Unicode("").tag(sync=True)
        autofocus = traitlets.Bool(True).tag(sync=True)

        def __init__(self, keys: Sequence[str], on_key: Callable[[str], None], label: str = "", **kwargs):
            super().__init__(watched=list(keys), label=label, **kwargs)
            self._on_key = on_key
            self.on_msg(self._message)
            self.add_class(CSS_KEYPAD)

        def _message(self, _widget, content, _buffers) -> None:
            key = content.get("key") if isinstance(content, dict) else None
            if isinstance(key, str) and key in self.watched:
                self._on_key(key)

        def focus(self) -> None:
            """Give the pad the keyboard focus in every view of it (e.g. once the annotator is chosen)."""
            self.send({"focus": True})

        def press(self, key: str) -> None:
            """What the browser does for a key press on the focused pad (for tests and scripted use)."""
            self._message(self, {"key": key}, [])

    return KeyPad
