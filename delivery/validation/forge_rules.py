"""Checks of the attributes that change what a run writes to the forge (SPEC §7.1).

Rule ids: `merge_policy` (a merge node's `policy` is `all`, the default — the PRs merge as
one change set — or `each`; `rollback=revert` needs `all`, since `each` merges PRs that do
not depend on each other) and `attribute_value` for `draft=` on a publish node (true or
false). Either attribute on another node type is a warning: it changes nothing there.
"""

from __future__ import annotations

from delivery.lang.diagnostics import Diagnostic
from delivery.lang.model import Attribute, NodeType, Workflow

MERGE_POLICIES = ("all", "each")
_OWNERS = {"policy": NodeType.MERGE, "draft": NodeType.PUBLISH}


def check_forge_attributes(workflow: Workflow) -> list[Diagnostic]:
    found: list[Diagnostic] = []

    def add(rule: str, attr: Attribute, node: str, message: str, fix: str,
            severity: str = "error") -> None:
        found.append(Diagnostic(rule, "error" if severity == "error" else "warning", message,
                                workflow.file, attr.value.line, attr.value.column, node, None,
                                fix))

    for node in workflow.nodes.values():
        for name, owner in _OWNERS.items():
            attr = node.attrs.get(name)
            if attr is not None and node.type is not owner:
                add("merge_policy" if name == "policy" else "attribute_value", attr, node.id,
                    f"'{node.id}' has {name}= but is not a {owner.value} node, so it changes "
                    "nothing", f"move {name}= to the {owner.value} node", severity="warning")
        policy = node.attrs.get("policy")
        if node.type is NodeType.MERGE and policy is not None:
            if policy.text not in MERGE_POLICIES:
                add("merge_policy", policy, node.id, f"policy={policy.text!r} is not one of "
                    f"{', '.join(MERGE_POLICIES)}", "write policy=each to merge every ready PR "
                    "on its own, or policy=all (the default) to merge the set together")
            elif policy.text == "each" and node.attr("rollback").strip() == "revert":
                add("merge_policy", node.attrs["rollback"], node.id, "rollback=revert reverts "
                    "the PRs of a set, but policy=each merges each PR on its own",
                    "drop rollback=, or write policy=all")
        draft = node.attrs.get("draft")
        if node.type is NodeType.PUBLISH and draft is not None \
                and draft.text not in ("true", "false"):
            add("attribute_value", draft, node.id, f"draft={draft.text!r} is not true or false",
                "write draft=true")
    return found
