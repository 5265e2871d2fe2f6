# Every target that runs code first makes sure .venv holds the project and everything it needs,
# so `make demo` and `make test` work on a machine that has only python3.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# checkov pins versions that clash with apache-beam's, so it lives in a venv of its own.
TOOLS := .venv-checkov
TOOLS_STAMP := $(TOOLS)/.installed
PYTEST_ARGS ?=

.PHONY: setup browser demo test lint bench docs clean constraints

setup: $(STAMP) $(TOOLS_STAMP) browser

# The inspect report's test renders it in headless Chromium. Installed from Debian's packages only where
# that is possible without asking (root on Debian, as CI runs); elsewhere the test says why it skips.
browser:
	@if [ "$$(id -u)" = 0 ] && [ -f /etc/debian_version ] && ! command -v chromium >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; fi

# pyproject.toml holds ranges; constraints.txt pins the set the suite passed on, so every checkout and CI
# installs the same versions. `make constraints` writes it again from .venv after a range changed.
$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade uv
	$(VENV)/bin/uv pip install --python $(PY) -c constraints.txt -e '.[all,test,docs]'
	touch $@

constraints: $(STAMP)
	@{ sed -n '1,2p' constraints.txt; $(VENV)/bin/uv pip freeze --python $(PY) --exclude-editable \
		| grep -v -e '^uv==' -e '^pip=='; } > constraints.txt.new && mv constraints.txt.new constraints.txt

$(TOOLS_STAMP):
	test -x $(TOOLS)/bin/python || $(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install -q --upgrade uv
	$(TOOLS)/bin/uv pip install --python $(TOOLS)/bin/python 'checkov>=3.2,<4'
	touch $@

demo: $(STAMP)
	$(PY) -m dew.pipelines.demo --workdir demo-out

test: $(STAMP) $(TOOLS_STAMP) browser
	PATH="$(CURDIR)/$(TOOLS)/bin:$$PATH" $(PY) -m pytest $(PYTEST_ARGS)

# mypy reads [tool.mypy] in pyproject.toml and keeps its cache in .mypy_cache.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m mypy -p dew.data -p dew.preprocess -p dew.pipelines

bench: $(STAMP)
	@set -e; for script in benchmarks/bench_*.py; do echo "== $$script"; $(PY) $$script; done

# The site goes to site/; --strict fails on any broken link, anchor or API reference.
# NO_MKDOCS_2_WARNING only quiets a banner Material prints about MkDocs 2 on every build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) $(TOOLS) site .pytest_cache .ruff_cache .hypothesis .mypy_cache
