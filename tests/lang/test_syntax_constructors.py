"""The fast constructors of the syntax tree and the model (tuple.__new__ for the named
tuples Value and Attribute) make the very objects the classes' own constructors make:
equal, same hash, same repr, still read-only."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delivery.lang.model import Attribute, make_attribute
from delivery.lang.syntax import AttrAssign, Value, make_attr_assign, make_value

KINDS = st.sampled_from(["string", "int", "float", "duration", "bool", "word"])
POSITIONS = st.integers(min_value=1, max_value=10_000)


@given(KINDS, st.text(max_size=20), POSITIONS, POSITIONS, st.text(max_size=22),
       st.text(max_size=8), st.booleans())
def test_fast_constructors_make_what_init_makes(kind: str, text: str, line: int, column: int,
                                                 raw: str, key: str, inherited: bool) -> None:
    made = [(make_value(kind, text, line, column, raw),  # type: ignore[arg-type]
             Value(kind, text, line, column, raw))]  # type: ignore[arg-type]
    value = made[0][1]
    made.append((make_attr_assign(key, value, line, column, False),
                 AttrAssign(key, value, line, column)))
    made.append((make_attribute(key, value, line, column, inherited),
                 Attribute(key, value, line, column, inherited)))
    for fast, slow in made:
        assert type(fast) is type(slow)
        assert fast == slow
        assert hash(fast) == hash(slow)
        assert repr(fast) == repr(slow)
        assert tuple(fast) == tuple(slow)
        assert fast._asdict() == slow._asdict()


def test_an_object_from_a_fast_constructor_stays_frozen() -> None:
    value = make_value("word", "box", 1, 1, "box")
    with pytest.raises(AttributeError):
        value.text = "other"  # type: ignore[misc]
    attribute = make_attribute("shape", value, 1, 1, False)
    with pytest.raises(AttributeError):
        attribute.name = "other"  # type: ignore[misc]
    assert attribute.key == attribute.name == "shape" and attribute.text == "box"


def test_an_attribute_statement_is_a_model_attribute() -> None:
    """The builder keeps the parser's attributes as the model's (no copy per attribute)."""
    assert AttrAssign is Attribute
    assert AttrAssign("shape", make_value("word", "box", 1, 7, "box"), 1, 1).inherited is False
