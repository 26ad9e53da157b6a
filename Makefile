# The two commands of README.md. Both set up a fresh machine first (scripts/setup.sh is idempotent).
.PHONY: setup setup-vllm setup-chromium demo test test-vllm lint

setup:
	bash scripts/setup.sh

setup-vllm:
	bash scripts/setup_vllm.sh

setup-chromium:
	bash scripts/setup_chromium.sh

demo: setup
	.venv/bin/omnieval demo --out ./omnieval-demo

test: setup setup-vllm setup-chromium
	.venv/bin/python -m pytest -q tests
	.venv-vllm/bin/python -m pytest -q tests/test_vllm_engine.py tests/test_vllm_omni.py tests/test_vllm_pipeline.py

test-vllm: setup-vllm
	.venv-vllm/bin/python -m pytest -q tests/test_vllm_engine.py tests/test_vllm_omni.py tests/test_vllm_pipeline.py

lint: setup
	.venv/bin/ruff check omnieval kernels jobs tests
