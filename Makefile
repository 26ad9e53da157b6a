# The two commands of README.md. Both set up a fresh machine first (scripts/setup.sh is idempotent).
.PHONY: setup demo test lint

setup:
	bash scripts/setup.sh

demo: setup
	.venv/bin/omnieval demo --out ./omnieval-demo

test: setup
	.venv/bin/python -m pytest -q tests

lint: setup
	.venv/bin/ruff check omnieval kernels jobs tests
