"""Work scopes (SPEC §5): what a `work` output saves and `{{ current_work }}` renders.

A discriminated union on `"type"`: leaf, hierarchy, candidate, goal.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator


def _http_url(value: str) -> str:
    value = value.strip()
    if not (value.startswith("http://") or value.startswith("https://")) or len(value) < 9:
        raise ValueError(f"{value!r} is not an http(s) URL")
    return value


def _non_empty(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value.strip()


class _Scope(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LeafScope(_Scope):
    type: Literal["leaf"]
    ticket: str
    parent: str | None

    _ticket = field_validator("ticket")(_http_url)

    @field_validator("parent")
    @classmethod
    def _parent_url(cls, value: str | None) -> str | None:
        return None if value is None else _http_url(value)

    @model_validator(mode="after")
    def _not_own_parent(self) -> LeafScope:
        if self.parent is not None and self.parent == self.ticket:
            raise ValueError("a leaf cannot be its own parent: parent must differ from ticket")
        return self


class HierarchyScope(_Scope):
    type: Literal["hierarchy"]
    ticket: str
    children: list[str] = Field(min_length=1)

    _ticket = field_validator("ticket")(_http_url)

    @field_validator("children")
    @classmethod
    def _children_urls(cls, value: list[str]) -> list[str]:
        return [_http_url(child) for child in value]


class CandidateScope(_Scope):
    type: Literal["candidate"]
    description: str
    evidence: list[str] = Field(min_length=1)

    _description = field_validator("description")(_non_empty)

    @field_validator("evidence")
    @classmethod
    def _evidence_text(cls, value: list[str]) -> list[str]:
        return [_non_empty(item) for item in value]


class GoalScope(_Scope):
    type: Literal["goal"]
    goal: str

    _goal = field_validator("goal")(_non_empty)


WorkScope = Annotated[
    LeafScope | HierarchyScope | CandidateScope | GoalScope, Field(discriminator="type")
]
WORK_SCOPE: TypeAdapter[WorkScope] = TypeAdapter(WorkScope)


def describe_work(scope: WorkScope) -> str:
    """The scope as readable text, for prompts."""
    if isinstance(scope, LeafScope):
        parent = f" (part of {scope.parent})" if scope.parent else ""
        return f"Ticket {scope.ticket}{parent}"
    if isinstance(scope, HierarchyScope):
        children = "\n".join(f"- {child}" for child in scope.children)
        return f"Ticket {scope.ticket} with sub-tickets:\n{children}"
    if isinstance(scope, CandidateScope):
        evidence = "\n".join(f"- {item}" for item in scope.evidence)
        return f"Candidate work: {scope.description}\nEvidence:\n{evidence}"
    return f"Goal: {scope.goal}"
