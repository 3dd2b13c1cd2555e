"""The language layer's modules import one another one way only: a cycle (even through a
function-level import, as template_reads ↔ light_reads ↔ jinja_reads had) makes what a
module holds depend on which of them was imported first."""

from __future__ import annotations

import grimp


def test_no_module_of_the_language_layer_imports_one_that_imports_it_back() -> None:
    graph = grimp.build_graph("delivery", exclude_type_checking_imports=True)
    lang = {m for m in graph.modules if m == "delivery.lang" or m.startswith("delivery.lang.")}
    cycles = []
    for module in sorted(lang):
        for imported in sorted(graph.find_modules_directly_imported_by(module) & lang):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back is not None:
                cycles.append(" -> ".join((module, *back)))
    assert cycles == []
