"""costmodel.record: a record is a frozen dataclass (start-up, issue 14): the same behaviour, field for field,
and the standard library's dataclass functions (fields, replace, asdict, is_dataclass) work on it, so callers
of the public API (costmodel.api returns records) and the notebooks keep using them."""

import copy
import dataclasses
import inspect
import pickle
from typing import ClassVar

import pytest

from costmodel.record import record


@record
class Part:
    """A record with every kind of field."""

    name: str
    size: float = 1.0
    memo: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)
    unit: ClassVar[str] = "B"


@dataclasses.dataclass(frozen=True)
class Twin:
    """The same fields as a frozen dataclass."""

    name: str
    size: float = 1.0
    memo: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)
    unit: ClassVar[str] = "B"


def test_a_record_behaves_as_the_frozen_dataclass_with_the_same_fields():
    a, b = Part("w", 2.0, {"x": 1}), Twin("w", 2.0, {"x": 1})
    assert repr(a).replace("Part", "Twin") == repr(b)
    assert (a == Part("w", 2.0), a == Part("w", 3.0), a == Twin("w", 2.0)) == (True, False, False)
    assert hash(a) == hash(Part("w", 2.0, {"y": 2})) == hash(b)  # over the compared fields
    assert Part("w").memo is not Part("w").memo  # a fresh default from the factory each time
    assert Part.size == Twin.size == 1.0 and not hasattr(Part, "memo") and Part.unit == "B"
    for change in (lambda: setattr(a, "size", 3.0), lambda: delattr(a, "name")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            change()
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'name'"):
        Part()
    assert str(inspect.signature(Part)) == str(inspect.signature(Twin)).replace("Twin", "Part")


def test_the_standard_librarys_dataclass_functions_work_on_records():
    a = Part("w", 2.0)
    assert dataclasses.is_dataclass(a) and [f.name for f in dataclasses.fields(Part)] == ["name", "size", "memo"]
    assert dataclasses.replace(a, size=5.0) == Part("w", 5.0) and a.size == 2.0
    with pytest.raises(TypeError):
        dataclasses.replace(a, sise=5.0)
    assert dataclasses.asdict(Part("u", memo={"in": Part("v")})) == {"name": "u", "size": 1.0, "memo": {"in": {
        "name": "v", "size": 1.0, "memo": {}}}}
    assert dataclasses.astuple(a) == ("w", 2.0, {})
    assert pickle.loads(pickle.dumps(a)) == a == copy.copy(a) == copy.deepcopy(a)


def test_subclasses_own_methods_post_init_and_mistakes():
    @record
    class Wider(Part):
        """A record extending another, with its own repr and a check after init."""

        count: int = 0

        def __post_init__(self):
            if self.count < 0:
                raise ValueError("count < 0")

        def __repr__(self):
            return "mine"

    assert [f.name for f in dataclasses.fields(Wider)] == ["name", "size", "memo", "count"]
    assert Wider("w", count=3).count == 3 and repr(Wider("w")) == "mine"
    with pytest.raises(ValueError, match="count < 0"):
        Wider("w", count=-1)

    class Plain(Part):
        """Not a record: it may set attributes that are not fields, as a frozen dataclass's subclass may."""

    p = Plain("w")
    p.extra = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.size = 2.0
    with pytest.raises(ValueError, match="mutable default"):
        record(type("Bad", (), {"__annotations__": {"items": list}, "items": []}))
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        record(type("Bad", (), {"__annotations__": {"a": int, "b": int}, "a": 0}))

    @record
    class Odd:
        """Fields named as the generated code's own names."""

        self: int = 1
        _s: int = 2

    assert (Odd().self, Odd()._s, Odd(3, 4)) == (1, 2, Odd(self=3, _s=4))


def test_init_is_compiled_when_first_looked_up_by_the_class_or_a_subclass():
    def fresh():
        @record
        class Late:
            """Nothing built yet."""

            name: str
            size: float = 1.0

        return Late

    assert type(fresh().__dict__["__init__"]).__name__ == "_Lazy"
    built = fresh()
    assert repr(built("w")).endswith(".Late(name='w', size=1.0)")
    assert type(built.__dict__["__init__"]).__name__ == "function"
    for first in (lambda c: str(inspect.signature(c)) == "(name: str, size: float = 1.0) -> None",
                  lambda c: type("Plain", (c,), {})("w", 2.0).size == 2.0,
                  lambda c: c.__init__.__qualname__.endswith("Late.__init__")):
        assert first(fresh())  # however __init__ is first reached, the class behaves the same


def test_a_record_with_one_or_no_compared_field_hashes_as_a_dataclass():
    one = [kind(type("One", (), {"__annotations__": {"x": int}})) for kind in (record, dataclasses.dataclass(frozen=True))]
    none = [kind(type("None_", (), {"__annotations__": {"x": int}, "x": dataclasses.field(compare=False)}))
            for kind in (record, dataclasses.dataclass(frozen=True))]
    assert hash(one[0](3)) == hash(one[1](3)) and one[0](3) == one[0](3) != one[0](4)
    assert hash(none[0](3)) == hash(none[1](3)) and none[0](3) == none[0](4)
