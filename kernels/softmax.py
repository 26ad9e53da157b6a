"""The restricted softmax of one instance's option-label logprobs: the ``rs`` confidence (docs/reference.md), one
definition for the engines that score from logits and for the metrics reader that fills a missing confidence.

Plain Python on purpose: ``math.exp`` and a left-to-right sum are the arithmetic the engines have always written
their confidences with, so those stay the same floats (numpy's vectorised ``exp`` can differ in the last bit), and
the engines need not import numba for it."""

from __future__ import annotations

import math
from collections.abc import Sequence


def restricted_softmax(logprobs: Sequence[float | None]) -> list[float]:
    """Softmax over the option-label logprobs only. An entry that is None, NaN or infinite is a label with no
    logprob (not offered, not found among an endpoint's top logprobs): its probability is 0. When no entry is
    finite there is no distribution to report and every probability is NaN (not 0: zeros would read as a
    confidence of 0); the engines make that an errored answer, the reader leaves the confidence null."""
    finite = [x for x in logprobs if x is not None and math.isfinite(x)]
    if not finite:
        return [math.nan] * len(logprobs)
    top = max(finite)
    exps = [math.exp(x - top) if x is not None and math.isfinite(x) else 0.0 for x in logprobs]
    total = sum(exps)
    return [e / total for e in exps]
