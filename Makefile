# The two commands: `make study` (the whole study on the embedded demo) and `make test` (unit tests + nbval).
# Both install into .venv on first use; the install is redone only when pyproject.toml changes.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: study test install clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

study: $(STAMP)
	$(BIN)/pmrag study params/demo.yaml

test: $(STAMP)
	$(BIN)/python -m pytest tests notebooks --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

clean:
	rm -rf $(VENV) outputs/demo
