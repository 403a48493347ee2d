.PHONY: setup test lint format dev demo bench

setup:
	scripts/setup.sh

test:
	scripts/test.sh

lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

format: setup
	.venv/bin/ruff format .
	.venv/bin/ruff check --fix .

# LangGraph Studio on the graph (langgraph.json); open the printed Studio URL.
dev: setup
	LANGSMITH_TRACING=false LANGGRAPH_CLI_NO_ANALYTICS=1 .venv/bin/langgraph dev --no-browser --port $${PORT:-2024}

demo: setup
	.venv/bin/veriloop demo

bench: setup
	.venv/bin/python -m benchmarks.verification_overhead
	.venv/bin/python -m benchmarks.verification_prompt_size
	.venv/bin/python -m benchmarks.service_overhead
	.venv/bin/python -m benchmarks.service_concurrency
	.venv/bin/python -m benchmarks.state_growth
	.venv/bin/python -m benchmarks.no_change_detection
	.venv/bin/python -m benchmarks.plan_parallelism
	.venv/bin/python -m benchmarks.plan_false_completions
	.venv/bin/python -m benchmarks.corrective_prompt_growth
