"""A wave's measurement (measurement.json): checked as plain data, then typed (`WaveMeasurement.from_dict`, the
records' shared header), built on `Record`, the plain-data dataclass every typed record is."""
from __future__ import annotations

import dataclasses
import math
import re
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Mapping

if TYPE_CHECKING:  # provenance's records are built on Record: importing it here would be circular
    from foxlib.core.provenance import Citation

DEVICE_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")
DEVICE_TYPES = ("cpu", "cuda")
# memory figures of a step profile (bytes; never negative), beside every key that names "bytes"
PROFILE_BYTES = ("parameters", "gradients", "optimizer_state", "activations", "peak", "forward_peak",
                 "live_before_step", "batch")


def readable_version(d: Mapping[str, Any], wave: str, version: int, *, absent: int | None = 1,
                     source: str = "") -> int:
    """d's "schema_version" (`absent` where the key is missing; None: it is required), which must be `version`, the
    one this foxlib reads (committed files are migrated, never read in an older form); a ValueError, naming what to
    do, unless it is (an int: a bool or a float is not a version) and the record is of `wave`."""
    found = d.get("schema_version", absent)
    source = source or f"the wave {wave} record"
    if type(found) is not int or found != version:  # a bool (True == 1) or a float (2.0 == 2) is no version
        newer = type(found) is int and found > version
        raise ValueError(f"{source} has schema_version {found!r}; this foxlib reads {version}: "
                         + ("update foxlib to read it" if newer else "measure it again with this revision"))
    if str(d.get("wave", wave)) != wave:
        raise ValueError(f"a measurement of wave {d['wave']!r}, not {wave}")
    return found


def _walk(obj: Any, path: str = ""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _walk(v, f"{path}.{k}" if path else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk(v, f"{path}[{i}]")
    else:
        yield path, obj


def _is_bytes_key(path: str) -> bool:
    key = re.sub(r"\[\d+\]$", "", path.rsplit(".", 1)[-1])
    return "bytes" in key or key in PROFILE_BYTES


class Record:
    """A dataclass that is plain data field for field: to_dict writes every field through plain(); from_dict makes
    it from its keys (a missing or unknown one: a TypeError), typing the fields PARTS and MANY name (typed). A part
    is a record class or a function of the stored value (e.g. one that tells a failure from a result)."""
    PARTS: ClassVar[dict[str, Any]] = {}
    MANY: ClassVar[dict[str, Any]] = {}

    @classmethod
    def from_dict(cls, d: dict[str, Any]):
        return cls(**d | typed(cls.PARTS, cls.MANY, d))

    def to_dict(self) -> dict[str, Any]:
        return {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}


def plain(value: Any) -> Any:
    """A record (a dataclass with a to_dict), or a dict, list or tuple of them, as plain data: each record through its
    own to_dict, another dataclass field by field."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return value.to_dict() if hasattr(value, "to_dict") else Record.to_dict(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return [plain(v) for v in value] if isinstance(value, (list, tuple)) else value


def typed(parts: dict[str, Any], many: dict[str, Any], d: dict[str, Any]) -> dict[str, Any]:
    """The keys of `d` that `parts` (one record each) and `many` (a record per name) name, typed through their
    records' from_dict (or the function given); a list: a tuple of them; a key absent stays absent, a None None."""
    def one(part: Any, value: Any) -> Any:
        make = getattr(part, "from_dict", part)
        return tuple(map(make, value)) if isinstance(value, list) else make(value)
    return {k: None if d[k] is None else one(part, d[k]) for k, part in parts.items() if k in d} | {
        k: None if d[k] is None else {n: one(part, v) for n, v in d[k].items()} for k, part in many.items() if k in d}


def written(record: Any, names: Iterable[str] | None = None) -> dict[str, Any]:
    """The dataclass `record`'s fields (those of `names`, in that order; default: all) as plain data, each through
    plain(); a field that holds its default is left out, as an absent key reads as that default."""
    fields = {f.name: f for f in dataclasses.fields(record)}
    return {k: plain(getattr(record, k)) for k in (fields if names is None else names)
            if fields[k].default is dataclasses.MISSING or getattr(record, k) != fields[k].default}


class Sparse(Record):
    """A Record whose fields that hold their default are absent from its dict (written)."""

    def to_dict(self) -> dict[str, Any]:
        return written(self)


@dataclasses.dataclass(frozen=True)
class Device(Sparse):
    """Where a wave was measured (foxlib.memory.devices.describe): its type (one of DEVICE_TYPES), name and the short
    name its reports are filed under; a GPU's memory and compute capability, or the CPU's torch threads."""
    type: str
    name: str
    short: str
    total_memory_bytes: int | None = None  # CUDA only
    capability: str | None = None  # CUDA only: "major.minor"
    threads: int | None = None  # the CPU only


@dataclasses.dataclass(frozen=True, kw_only=True)
class Environment(Sparse):
    """What a wave was measured with (foxlib.memory.devices.environment): versions, platform and revision."""
    python: str
    torch: str
    cuda: str | None  # torch's CUDA version; None in a CPU build
    platform: str
    driver: str | None = None  # the GPU driver (NVML): absent where there is no GPU or NVML does not say
    git_revision: str | None  # foxlib.core.provenance.git_revision; None if unknown


@dataclasses.dataclass(frozen=True)
class WaveMeasurement(Sparse):
    """A wave's measurement.json, typed: the header (wave, measured_at and measure_parameters: foxlib.core.results
    .measures; device and environment: records), then the fields a subclass declares (`class Measurement(
    WaveMeasurement, wave="8.10", version=2)`), records typed by PARTS / MANY (Record) or typed_parts. A field with
    a default may be absent, read as that default (to_dict leaves it out while it holds it: Sparse); from_dict runs
    check_plain."""
    WAVE: ClassVar[str]
    SCHEMA_VERSION: ClassVar[int]
    WRITTEN_LAST: ClassVar[tuple[str, ...]] = ()
    """Fields to_dict writes after schema_version (where the wave's measurement.json has them)."""
    wave: str
    measured_at: str
    measure_parameters: dict[str, Any]
    device: Device
    environment: Environment
    schema_version: int

    def __init_subclass__(cls, wave: str = "", version: int = 0, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.WAVE, cls.SCHEMA_VERSION = wave, version

    @classmethod
    def keys(cls) -> list[str]:  # declared order, schema_version last
        return [f.name for f in dataclasses.fields(cls) if f.name != "schema_version"] + ["schema_version"]

    @classmethod
    def required(cls) -> list[str]:
        """The keys a measurement must hold: every field without a default, in keys()' order."""
        optional = {f.name for f in dataclasses.fields(cls)
                    if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING}
        return [k for k in cls.keys() if k not in optional]

    @classmethod
    def typed_parts(cls, d: dict[str, Any]) -> dict[str, Any]:
        """The fields of `d` that are typed records in a way PARTS and MANY cannot say, typed."""
        return {}

    def prediction_pairs(self) -> dict[str, tuple[Any, Any]]:
        """Each measured step's (predicted, measured) profiles, as foxlib.memory.tolerances.summary takes them; none
        for a wave that predicts nothing."""
        return {}

    def snapshot_file(self) -> str:
        """The CUDA allocator snapshot of the measured step, where the wave takes one (a path on the machine that
        measured; "" where none was taken)."""
        return ""

    def citations(self) -> tuple[Citation, ...]:
        """The published results files the measurement read (its depends_on: foxlib.core.provenance.verify checks
        them still are); none for a wave that reads none."""
        return tuple(getattr(self, "depends_on", None) or ())

    @classmethod
    def check_plain(cls, data: Any, source: str = "the measurement") -> None:
        """ValueError, naming the problem, unless `data` is a measurement of this wave and SCHEMA_VERSION (1 without
        "schema_version"): a device whose short name is a plain folder name, every required() key present and not
        null (but an Optional field's), no key outside keys(), numbers finite, no memory figure negative."""
        wave, required, allowed = cls.WAVE, cls.required(), cls.keys()
        if not isinstance(data, dict):
            raise ValueError(f"{source} is not a measurement (a JSON object), got {type(data).__name__}")
        if data.get("wave") != wave:
            raise ValueError(f"{source} is not a wave {wave} measurement (it holds wave {data.get('wave')!r})")
        readable_version(data, wave, cls.SCHEMA_VERSION, source=source)
        dev = data.get("device")
        if not isinstance(dev, dict):
            raise ValueError(f"{source} has no device record (device: {{type, name, short}})")
        short = dev.get("short")
        if not isinstance(short, str) or not DEVICE_NAME.fullmatch(short):
            raise ValueError(f"{source}: device.short {short!r} is not a plain device name (lower-case letters, digits "
                             "and '-', starting with a letter or digit, e.g. cpu, h200): it names the report's folder")
        if dev.get("type") not in DEVICE_TYPES:
            raise ValueError(f"{source}: device.type {dev.get('type')!r} is not one of {', '.join(DEVICE_TYPES)}")
        if not isinstance(dev.get("name"), str) or not dev["name"].strip():
            raise ValueError(f"{source}: device.name is missing")
        nullable = [f.name for f in dataclasses.fields(cls) if "None" in str(f.type)]
        missing = [k for k in required if k not in data or (data[k] is None and k not in nullable)]
        if missing:
            raise ValueError(f"{source} lacks {', '.join(missing)}: a wave {wave} measurement holds "
                             f"{', '.join(required)}")
        unknown = sorted(set(data) - set(allowed))
        if unknown:
            raise ValueError(f"{source} holds {', '.join(unknown)}, which a wave {wave} measurement does not: "
                             f"it holds {', '.join(allowed)}")
        for path, value in _walk(data):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"{source}: {path} is {value} (every figure must be a finite number)")
            if value < 0 and _is_bytes_key(path):
                raise ValueError(f"{source}: {path} is {value} bytes (a memory figure is never negative)")

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "the measurement"):
        """The measurement in `d` (measurement.json's data); a ValueError naming what is wrong, a malformed part
        (a KeyError, a TypeError, a part's own ValueError) included."""
        cls.check_plain(d, source)
        try:
            return cls(**d | typed({"device": Device, "environment": Environment} | cls.PARTS, cls.MANY, d)
                       | cls.typed_parts(d))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{source}: a part of this wave {cls.WAVE} measurement is malformed "
                             f"({type(exc).__name__}: {exc})") from None

    def to_dict(self) -> dict[str, Any]:
        return written(self, [k for k in self.keys() if k not in self.WRITTEN_LAST] + list(self.WRITTEN_LAST))
