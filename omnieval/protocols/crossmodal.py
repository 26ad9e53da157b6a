"""Protocol ``crossmodal`` (XModBench; SPEC.md section 4) - for now only its metrics of direction accuracies.

A direction ``X->Y`` gives the context in modality X and the candidates in modality Y (A audio, V vision, T text).
Item expansion, prompts and the per-task / per-subtask keys, ``consistency`` and ``agreement`` belong to the
protocol's own issue; what is here is what ``omnieval metrics`` (and ``omnieval bench stats``) need today:
accuracy per direction and the functions of direction accuracies below, vectorised over the bootstrap rows.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

NAME = "crossmodal"
DIRECTIONS: tuple[str, ...] = ("A->T", "A->V", "T->A", "T->V", "V->A", "V->T")
EXTRA_CONDITIONS: tuple[str, ...] = ("AV->T", "none->T")
DISPARITY_PAIRS: tuple[tuple[str, str], ...] = (("T", "V"), ("T", "A"), ("V", "A"))
IMBALANCE_PAIRS: tuple[tuple[str, str], ...] = (("A", "T"), ("V", "T"), ("V", "A"))


# === metrics (cell means -> metric values) ===

def average(acc: Mapping[str, np.ndarray]) -> np.ndarray:
    """Mean of the six direction accuracies."""
    return np.mean([acc[d] for d in DIRECTIONS], axis=0)


def std(acc: Mapping[str, np.ndarray]) -> np.ndarray:
    """Sample standard deviation (ddof=1) of the six direction accuracies."""
    return np.std([acc[d] for d in DIRECTIONS], axis=0, ddof=1)


def disparity(acc: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``D(X vs Y) = (Acc[Z->Y] - Acc[Z->X]) + (Acc[Y->Z] - Acc[X->Z])``, Z the third modality; keys ``X_vs_Y``."""
    out = {}
    for x, y in DISPARITY_PAIRS:
        (z,) = {"A", "V", "T"} - {x, y}
        out[f"{x}_vs_{y}"] = (acc[f"{z}->{y}"] - acc[f"{z}->{x}"]) + (acc[f"{y}->{z}"] - acc[f"{x}->{z}"])
    return out


def imbalance(acc: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``Acc[X->Y] - Acc[Y->X]``; keys ``X<->Y``."""
    return {f"{x}<->{y}": acc[f"{x}->{y}"] - acc[f"{y}->{x}"] for x, y in IMBALANCE_PAIRS}


def metric_rows(cells):
    """Accuracy per direction (and extra conditions), average, std, disparity, imbalance, invalid rate."""
    acc = {c: cells.mean("acc", c) for (c,) in cells.keys("acc")}
    n = {c: cells.n("acc", c) for c in acc}
    for c in acc:
        yield "accuracy", c, acc[c], n[c]
    if all(d in acc for d in DIRECTIONS):
        n_six = sum(n[d] for d in DIRECTIONS)
        yield "average", "", average(acc), n_six
        yield "std", "", std(acc), n_six
        for key, values in disparity(acc).items():
            yield "disparity", key, values, n_six
        for key, values in imbalance(acc).items():
            x, y = key.split("<->")
            yield "imbalance", key, values, n[f"{x}->{y}"] + n[f"{y}->{x}"]
    if cells.has("invalid"):
        yield "invalid_rate", "", cells.mean("invalid"), cells.n("invalid")


def metrics_spec():
    """The cells and metric function of this protocol for ``omnieval.metrics``."""
    from omnieval.metrics import CellFamily, ProtocolMetrics

    return ProtocolMetrics(
        name=NAME,
        families=(CellFamily("acc", "correct", "valid", ("condition",)), CellFamily("invalid", "invalid")),
        metrics=metric_rows,
        conditions=DIRECTIONS + EXTRA_CONDITIONS,
    )
