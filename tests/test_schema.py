"""foxlib.core.schema.readable_version: one schema check for every wave's record."""
import pytest

from foxlib.core.schema import readable_version


def test_versions_this_foxlib_reads_and_those_it_refuses():
    assert readable_version({}, "8.10", 2) == 1  # files from before the key: version 1
    assert readable_version({"schema_version": 2, "wave": "8.10"}, "8.10", 2) == 2
    with pytest.raises(ValueError, match="newer than this foxlib reads \\(2\\): update foxlib"):
        readable_version({"schema_version": 3}, "8.10", 2)
    with pytest.raises(ValueError, match="schema version 0: this foxlib reads versions 1..2"):
        readable_version({"schema_version": 0}, "8.12", 2)
    with pytest.raises(ValueError, match="schema version None"):
        readable_version({}, "8.12", 2, absent=None)  # a key the record must carry
    with pytest.raises(ValueError, match="a measurement of wave '8.11', not 8.10"):
        readable_version({"wave": "8.11"}, "8.10", 2)
