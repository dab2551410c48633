"""The schema version of a wave's record as plain data: one check for every wave's from_dict."""
from __future__ import annotations

from typing import Any, Mapping


def readable_version(d: Mapping[str, Any], wave: str, newest: int, *, oldest: int = 1,
                     absent: int | None = 1) -> int:
    """d's "schema_version" (`absent` where the key is missing; None: the key is required), checked
    against what this foxlib reads (oldest..newest) and against the wave the record says it is of.

    A ValueError names the version and what to do: a newer record needs a newer foxlib."""
    version = d.get("schema_version", absent)
    if not isinstance(version, int) or version < oldest:
        raise ValueError(f"a wave {wave} record of schema version {version!r}: this foxlib reads versions "
                         f"{oldest}..{newest}")
    if version > newest:
        raise ValueError(f"a wave {wave} record of schema version {version}, newer than this foxlib reads "
                         f"({newest}): update foxlib to read it")
    if str(d.get("wave", wave)) != wave:
        raise ValueError(f"a measurement of wave {d['wave']!r}, not {wave}")
    return version
