"""costmodel.record: the frozen records that stand in for frozen dataclasses (start-up, issue 14) behave as
frozen dataclasses do, field for field."""

import copy
import dataclasses
import pickle

import pytest

from costmodel.record import asdict, field, names, record, replace


@record
class Part:
    """A record with every kind of field."""

    name: str
    size: float = 1.0
    memo: dict = field(default_factory=dict, compare=False, repr=False)


@dataclasses.dataclass(frozen=True)
class Twin:
    """The same fields as a frozen dataclass."""

    name: str
    size: float = 1.0
    memo: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)


def test_a_record_behaves_as_the_frozen_dataclass_with_the_same_fields():
    a, b = Part("w", 2.0, {"x": 1}), Twin("w", 2.0, {"x": 1})
    assert repr(a).replace("Part", "Twin") == repr(b)
    assert (a == Part("w", 2.0), a == Part("w", 3.0), a == Twin("w", 2.0)) == (True, False, False)
    assert hash(a) == hash(Part("w", 2.0, {"y": 2})) and hash(a) == hash(b)  # over the compared fields
    assert Part("w").memo is not Part("w").memo  # a fresh default from the factory each time
    assert Part.size == Twin.size == 1.0 and not hasattr(Part, "memo")
    for change in (lambda: setattr(a, "size", 3.0), lambda: delattr(a, "name")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            change()
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'name'"):
        Part()


def test_replace_names_asdict_pickle_copy():
    a = Part("w", 2.0)
    assert replace(a, size=5.0) == Part("w", 5.0) and a.size == 2.0
    with pytest.raises(TypeError, match="no field 'sise'"):
        replace(a, sise=5.0)
    assert names(Part) == names(a) == ("name", "size", "memo")
    assert asdict([Part("u", memo={"in": Part("v")})]) == [{"name": "u", "size": 1.0, "memo": {"in": {
        "name": "v", "size": 1.0, "memo": {}}}}]
    assert pickle.loads(pickle.dumps(a)) == a == copy.copy(a)


def test_a_base_records_fields_come_first_and_mistakes_are_refused():
    @record
    class Wider(Part):
        """A record extending another."""

        count: int = 0

    assert names(Wider) == ("name", "size", "memo", "count") and Wider("w", count=3).count == 3
    with pytest.raises(ValueError, match="mutable default"):
        record(type("Bad", (), {"__annotations__": {"items": list}, "items": []}))
    with pytest.raises(TypeError, match="non-default field 'b' follows"):
        record(type("Bad", (), {"__annotations__": {"a": int, "b": int}, "a": 0}))
