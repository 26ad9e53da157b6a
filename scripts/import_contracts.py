"""An import-linter contract type that its built-in ones lack: an allow-list of what a package may import.

``forbidden`` contracts name what may not be imported; a package meant to stay tiny (``omnieval.kernels``: numba and
numpy, nothing else) is better guarded by naming what it may import, so that a new dependency of any kind breaks the
contract. Registered in ``pyproject.toml`` under ``[tool.importlinter] contract_types`` (``lint-imports`` puts the
working directory on ``sys.path``, so it must run from the repository root) and used as::

    [[tool.importlinter.contracts]]
    name = "..."
    type = "allowed_imports"
    source_modules = ["omnieval.kernels"]
    allowed_modules = ["numpy", "numba"]

Every module in ``source_modules`` (packages included, with all their modules) may import the modules of that
source (``omnieval.kernels``: its own modules, nothing else of ``omnieval``), the standard library
(``sys.stdlib_module_names``) and the top-level packages in ``allowed_modules``; any other import, inside a function
or not, breaks the contract. It needs ``include_external_packages = true`` in ``[tool.importlinter]``, so that
third-party imports are in the graph.
"""

from __future__ import annotations

import sys

from grimp import ImportGraph
from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


class AllowedImportsContract(Contract):
    type_name = "allowed_imports"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    allowed_modules = fields.ListField(subfield=fields.StringField())

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        allowed = set(self.allowed_modules) | set(sys.stdlib_module_names)  # type: ignore[arg-type]
        illegal = []
        for source in self.source_modules:  # type: ignore[attr-defined]
            if source.name not in graph.modules:
                raise ValueError(f"Module '{source.name}' does not exist.")
            own = source.name
            for module in sorted({source.name} | graph.find_descendants(source.name)):
                for imported in sorted(graph.find_modules_directly_imported_by(module)):
                    top = imported.split(".")[0]
                    if imported == own or imported.startswith(own + ".") or top in allowed:
                        continue
                    lines = sorted(d["line_number"] for d in graph.get_import_details(importer=module,
                                                                                      imported=imported))
                    illegal.append({"importer": module, "imported": imported, "line_numbers": lines})
        return ContractCheck(kept=not illegal, metadata={"illegal": illegal})

    def render_broken_contract(self, check: ContractCheck) -> None:
        names = ", ".join(str(m) for m in self.allowed_modules)  # type: ignore[attr-defined]
        output.print_error(f"Only the standard library and {names} may be imported; not allowed:", bold=True)
        output.new_line()
        for link in check.metadata["illegal"]:
            where = f" (l.{', '.join(map(str, link['line_numbers']))})" if link["line_numbers"] else ""
            output.print_error(f"- {link['importer']} -> {link['imported']}{where}", bold=False)
        output.new_line()
