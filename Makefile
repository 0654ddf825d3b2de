# The two commands of the README do everything on a fresh machine:
#   make certify   the main job: certify the reference implementation (its SQLite store, in memory), write its reports
#   make test      the test suite, with ruff and mypy
# Each creates the virtual environment and installs the project on first use (make test also
# the openai<3 frameworks' environment and, when npm is here, the TypeScript packages).

PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
REPORT  ?= reports/reference

.PHONY: certify test lint typecheck render model bench mutation fast venv venv-openai2 node clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,sdks,frameworks,frameworks-more]'
	touch $(STAMP)

venv: $(STAMP)

# The agent frameworks that need openai<3 (crewai, llama-index), in an environment of their
# own: the matrix's rows for them run its interpreter (targets/framework_rows.py).
VENV2   := .venv-openai2
STAMP2  := $(VENV2)/.installed
$(STAMP2): pyproject.toml
	$(PY) -m venv $(VENV2)
	$(VENV2)/bin/pip install --quiet --upgrade pip
	$(VENV2)/bin/pip install --quiet -e '.[frameworks-openai2]'
	touch $(STAMP2)

venv-openai2: $(STAMP2)

# The TypeScript side (adapters/node: the helper, the example, the matrix's TypeScript rows and
# their repros), installed from its lockfile and compiled, when npm is here; without it the
# tests that need it skip, each with the reason.
NODE_STAMP := adapters/node/node_modules/.callsafe-installed
$(NODE_STAMP): adapters/node/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
	  (cd adapters/node && npm ci --no-audit --no-fund && npm run build) && touch $(NODE_STAMP); \
	else echo "npm is not here: the TypeScript rows' tests skip"; fi

node: $(NODE_STAMP)

certify: $(STAMP)
	$(BIN)/callsafe certify reference --report $(REPORT) --junit $(REPORT)/junit.xml
	$(BIN)/callsafe render --out $(REPORT)/diagrams --report $(REPORT)/report.json --png

model: $(STAMP)
	$(BIN)/callsafe model

render: $(STAMP)
	$(BIN)/callsafe render --out out

# the benchmarks (bench/RESULTS.md); PostgreSQL figures need CALLSAFE_PG_DSN (tools/postgres.sh start)
bench: $(STAMP)
	$(BIN)/python -m bench

# the optional compiled core: mypyc over the hot modules of reference_impl/ into build/fast/ (callsafe._fast);
# nothing imports it unless asked (the benchmark's core-compiled, tests/test_fast_build.py): the pure modules stay the reference
fast: $(STAMP)
	$(BIN)/python tools/build_fast.py

# mutation testing of reference_impl/ (cosmic-ray), the default certification of
# reference:memory as the only killer; a seeded sample of 160 mutants (MUTATION_ARGS="--sample 0": all)
MUTATION_ARGS ?=
mutation: $(STAMP)
	$(BIN)/python -m bench.mutation $(MUTATION_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	tools/typecheck.sh

test: $(STAMP) $(STAMP2) $(NODE_STAMP) lint typecheck
	$(BIN)/pytest -n 2 --dist loadgroup -q -rs

clean:
	rm -rf $(VENV) $(VENV2) build dist *.egg-info .typecheck .pytest_cache .mypy_cache .ruff_cache reports out

# the documentation site (mkdocs.yml) into site/, checked as CI checks it (tests/test_docs_site.py);
# `.venv/bin/mkdocs serve` to read it while editing
.PHONY: docs
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -d site
