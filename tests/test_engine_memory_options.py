"""The ``vllm`` engine's ``kv_cache_memory_bytes``: checked on the driver (no vLLM needed), and, like
``gpu_memory_utilization``, a memory share that is not part of a model's identity (changing it resumes a run)."""

from __future__ import annotations

import pytest

from omnieval.config import parse_run_config
from omnieval.core.schema import InputError
from omnieval.engines.base import engine_class
from omnieval.run.identity import model_identity
from omnieval.run.pipeline import engine_models
from omnieval.run.preflight import check_engines


def _config(small_bench, tmp_path, **options):
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text("{}")
    return parse_run_config({"benchmark": str(small_bench), "output": str(tmp_path / "out"),
                             "models": [{"name": "v", "engine": "vllm",
                                         "options": {"path": str(folder), **options}}]})


@pytest.mark.parametrize("value", [0, -1, "256M", 2.5e8, True])
def test_a_kv_cache_size_that_is_not_a_positive_number_of_bytes_is_refused_naming_the_option(small_bench, tmp_path,
                                                                                               value):
    config = _config(small_bench, tmp_path, kv_cache_memory_bytes=value)
    with pytest.raises(InputError, match="kv_cache_memory_bytes must be a positive number of bytes") as info:
        check_engines(config, engine_models(config))
    assert info.value.field == "models[0].options.kv_cache_memory_bytes"


def test_a_kv_cache_size_given_twice_is_refused(small_bench, tmp_path):
    config = _config(small_bench, tmp_path, kv_cache_memory_bytes=2**28,
                     engine_kwargs={"kv_cache_memory_bytes": 2**29})
    with pytest.raises(InputError, match="both as an option and in engine_kwargs") as info:
        check_engines(config, engine_models(config))
    assert info.value.field == "models[0].options.kv_cache_memory_bytes"


def test_the_kv_cache_size_is_accepted_and_left_out_of_the_identity(small_bench, tmp_path):
    plain = _config(small_bench, tmp_path, max_model_len=2048)
    sized = _config(small_bench, tmp_path, max_model_len=2048, kv_cache_memory_bytes=2**28,
                    gpu_memory_utilization=0.5)
    engine_class("vllm").check_options(dict(sized.models[0].options))  # the options pass (vLLM itself may be
    # absent here: pre-flight then refuses the engine for that alone, after the options)
    assert model_identity(sized.models[0]) == model_identity(plain.models[0])
    longer = _config(small_bench, tmp_path, max_model_len=4096, kv_cache_memory_bytes=2**28)
    assert model_identity(longer.models[0]) != model_identity(plain.models[0])  # a real option still counts
