"""omnieval: a high-throughput evaluator for omni-modal models (see README.md and docs/).

``omnieval.kernels`` (the numba kernels) lives in the top-level ``kernels/`` folder of the source tree, which the
packaging maps into this package (``[tool.setuptools] package-dir`` in pyproject.toml): a wheel holds it as
``omnieval/kernels/``, and an editable install's finder maps the name to the folder. Code run straight from a source
checkout (``PYTHONPATH=<checkout>``, a Ray job's uploaded ``working_dir``, an install of another checkout in the same
environment) has neither, so ``_CheckoutKernels`` maps the name to this checkout's folder. Installed from a wheel,
``kernels/`` beside the package would be another distribution's (PyPI's ``kernels``), so the mapping is only made in
a source tree (a ``pyproject.toml`` beside the package).
"""

import importlib.abc
import importlib.util
import sys
from pathlib import Path

__version__ = "0.1.0"

_HERE = Path(__file__).resolve().parent
_CHECKOUT_KERNELS = _HERE.parent / "kernels"


class _CheckoutKernels(importlib.abc.MetaPathFinder):
    """Finds ``omnieval.kernels`` in this source checkout's ``kernels/`` folder; its modules are then found by the
    ordinary path finder through the package's ``__path__``."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "omnieval.kernels":
            return None
        return importlib.util.spec_from_file_location(fullname, _CHECKOUT_KERNELS / "__init__.py",
                                                      submodule_search_locations=[str(_CHECKOUT_KERNELS)])


def _map_checkout_kernels() -> None:
    in_package = (_HERE / "kernels" / "__init__.py").is_file()
    in_checkout = (_CHECKOUT_KERNELS / "__init__.py").is_file() and (_HERE.parent / "pyproject.toml").is_file()
    if in_checkout and not in_package and not any(isinstance(f, _CheckoutKernels) for f in sys.meta_path):
        sys.meta_path.insert(0, _CheckoutKernels())  # before an editable install's finder of another checkout


_map_checkout_kernels()
