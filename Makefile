.PHONY: setup setup-dev test test-fast lint format dev demo notebooks bench

# The runtime dependencies only: enough for `veriloop demo`, `run`, `serve`, `plan`.
setup:
	scripts/setup.sh

# Also the dev extra: tests, lint, notebooks, benchmarks, LangGraph Studio.
setup-dev:
	scripts/setup.sh --dev

test:
	scripts/test.sh

# The unit tests of engines, schemas, graph and nodes (tests/engines, tests/graph and the plan
# engines' files of tests/plan): no browser, database, real model or `langgraph dev` server, and
# not the corpus-wide page-work regression (every corpus page through the page work, minutes of
# CPU); `make test` runs those. About 80 s of CPU, so under a minute on two idle cores.
FAST_MARKS = not browser and not postgres and not live and not live_local
PLAN_ENGINE_TESTS = $(addprefix tests/plan/test_,$(addsuffix .py,critic critic_reference manifest \
	predicates next_batch allowlist tamper fixloop hierarchy workspace))
FAST_TESTS = tests/engines tests/graph $(PLAN_ENGINE_TESTS) \
	--ignore=tests/graph/test_langgraph_dev.py --ignore=tests/graph/test_plan_langgraph_dev.py \
	--ignore=tests/engines/test_page_equivalence.py
test-fast: setup-dev
	LANGSMITH_TRACING=false .venv/bin/python -m pytest -q -p no:cacheprovider \
		-n $${VERILOOP_TEST_WORKERS:-2} --dist loadfile -m "$(FAST_MARKS)" $(FAST_TESTS)

lint: setup-dev
	scripts/lint.sh

format: setup-dev
	.venv/bin/ruff format .
	.venv/bin/ruff check --fix .

# LangGraph Studio on the graph (langgraph.json); open the printed Studio URL.
dev: setup-dev
	LANGSMITH_TRACING=false LANGGRAPH_CLI_NO_ANALYTICS=1 .venv/bin/langgraph dev --no-browser --port $${PORT:-2024}

demo: setup
	.venv/bin/veriloop demo

# Runs both notebooks top to bottom in a fresh kernel; the executed copies land in build/notebooks/.
notebooks: setup-dev
	.venv/bin/jupyter nbconvert --to notebook --execute --output-dir build/notebooks notebooks/*.ipynb

# The corpus is the shared folder beside this checkout (../shared/corpus/html); see README "Benchmarks".
bench: setup-dev
	.venv/bin/python -m benchmarks.verification_overhead
	.venv/bin/python -m benchmarks.verification_prompt_size
	.venv/bin/python -m benchmarks.service_overhead
	.venv/bin/python -m benchmarks.service_concurrency
	.venv/bin/python -m benchmarks.page_handover
	.venv/bin/python -m benchmarks.state_growth
	.venv/bin/python -m benchmarks.no_change_detection
	.venv/bin/python -m benchmarks.plan_parallelism
	.venv/bin/python -m benchmarks.plan_false_completions
	.venv/bin/python -m benchmarks.corrective_prompt_growth
