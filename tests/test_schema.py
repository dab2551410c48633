"""foxlib.core.schema.readable_version: one schema check for every wave's record."""
import pytest

from foxlib.core.schema import readable_version


def test_versions_this_foxlib_reads_and_those_it_refuses():
    """One version is read (committed files are migrated); an older, newer, missing or boolean one is refused with
    what to do."""
    assert readable_version({}, "8.10", 1) == 1  # files from before the key: version 1
    assert readable_version({"schema_version": 2, "wave": "8.10"}, "8.10", 2) == 2
    with pytest.raises(ValueError, match="schema_version 3; this foxlib reads 2: update foxlib to read it"):
        readable_version({"schema_version": 3}, "8.10", 2)
    with pytest.raises(ValueError, match="schema_version 1; this foxlib reads 2: measure it again"):
        readable_version({"schema_version": 1}, "8.12", 2)
    with pytest.raises(ValueError, match="schema_version None"):
        readable_version({}, "8.12", 2, absent=None)  # a key the record must carry
    with pytest.raises(ValueError, match="schema_version True; this foxlib reads 1: measure it again"):
        readable_version({"schema_version": True}, "8.12", 1)  # True == 1, but not a version
    with pytest.raises(ValueError, match="the wave 8.10 record has schema_version 2.0; this foxlib reads 2"):
        readable_version({"schema_version": 2.0}, "8.10", 2)  # 2.0 == 2, but not a version
    with pytest.raises(ValueError, match="a measurement of wave '8.11', not 8.10"):
        readable_version({"wave": "8.11"}, "8.10", 1)


def test_a_record_writes_a_nested_sparse_record_through_its_own_rule():
    """Record.to_dict writes each field through plain(): a Sparse part leaves its defaults out as it does alone, a
    plain dataclass is written field by field, and the dict reads back to an equal record."""
    import dataclasses
    from foxlib.core.schema import Device, Record

    @dataclasses.dataclass(frozen=True)
    class Point:
        x: int

    @dataclasses.dataclass(frozen=True)
    class Holder(Record):
        device: Device
        points: tuple[Point, ...]
        PARTS = {"device": Device, "points": lambda d: Point(**d)}  # a part may be a function of the stored value

    h = Holder(Device("cpu", "test", "cpu", threads=4), (Point(1), Point(2)))
    d = h.to_dict()
    assert d == {"device": {"type": "cpu", "name": "test", "short": "cpu", "threads": 4},
                 "points": [{"x": 1}, {"x": 2}]}
    assert Holder.from_dict(d) == h
