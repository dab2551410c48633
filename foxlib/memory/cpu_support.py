"""What this CPU can run: the test caps of scripts/test-isa.sh its flags allow (a cap above the CPU dies with
"Illegal instruction"; `python -m foxlib.memory.cpu_support caps`), and whether it has kernels for a 16-bit
precision (without them a conversion path runs tens to hundreds of times slower than fp32: `kernel_speed`).
"""
from __future__ import annotations

import functools
import os
import sys
import timeit
from dataclasses import dataclass
from pathlib import Path

@dataclass(frozen=True)
class IsaCap:
    """One cap of scripts/test-isa.sh: the two variables that set it, the CPU flags it needs, its rank."""
    dnnl: str  # DNNL_MAX_CPU_ISA (oneDNN's ceiling)
    aten: str  # ATEN_CPU_CAPABILITY (ATen's kernels)
    flags: frozenset[str]  # /proc/cpuinfo flags the cap's instructions need
    rank: int  # higher: a larger instruction set


CAPS = (
    IsaCap("AVX2", "avx2", frozenset({"avx2", "fma"}), 1),
    # avx512_bf16 without AMX, as on an AMD EPYC: ATen's avx512 kernels need F, BW, VL and DQ
    IsaCap("AVX512_CORE_BF16", "avx512", frozenset({"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_bf16"}), 2),
)
"""The caps the prediction and profiler tests run under, smallest first."""

_ATEN_RANK = {"default": 0, "avx2": 1, "avx512": 2}
_DNNL_RANK = {"SSE41": 0, "AVX": 0, "AVX2": 1, "AVX2_VNNI": 1, "AVX2_VNNI_2": 1, "AVX512_CORE": 2,
              "AVX512_CORE_VNNI": 2, "AVX512_CORE_BF16": 2, "AVX512_CORE_FP16": 3, "AVX512_CORE_AMX": 3,
              "AVX512_CORE_AMX_FP16": 3, "ALL": 99}


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The flags of the first processor in /proc/cpuinfo (or in `cpuinfo`, its text); empty where there is none."""
    if cpuinfo is None:
        path = Path("/proc/cpuinfo")
        if not path.is_file():
            return frozenset()
        cpuinfo = path.read_text(errors="replace")
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def environment_ceiling(env: dict[str, str] | None = None) -> tuple[int, str] | None:
    """(rank, why) of the lowest cap the environment sets (DNNL_MAX_CPU_ISA, ATEN_CPU_CAPABILITY), or None; an
    unknown value counts as none (the library ignores it too)."""
    env = os.environ if env is None else env
    found = [(ranks[value], f"{name}={value} is set") for name, value, ranks in (
        ("ATEN_CPU_CAPABILITY", env.get("ATEN_CPU_CAPABILITY", "").strip().lower(), _ATEN_RANK),
        ("DNNL_MAX_CPU_ISA", env.get("DNNL_MAX_CPU_ISA", "").strip().upper(), _DNNL_RANK)) if value in ranks]
    return min(found, default=None)


@dataclass(frozen=True)
class CapPlan:
    """A cap and whether it runs here; `reason` says why not."""
    cap: IsaCap
    runs: bool
    reason: str = ""


def runnable_caps(flags: frozenset[str], env: dict[str, str] | None = None) -> list[CapPlan]:
    """Every cap of CAPS, in order, with whether this CPU's `flags` and the environment's own cap allow it."""
    ceiling = environment_ceiling(env)
    out = []
    for cap in CAPS:
        if missing := sorted(cap.flags - flags):
            out.append(CapPlan(cap, False, f"this CPU lacks {', '.join(missing)}: torch would stop with "
                                          "'Illegal instruction'"))
        elif ceiling is not None and cap.rank > ceiling[0]:
            out.append(CapPlan(cap, False, f"above the environment's own cap ({ceiling[1]})"))
        else:
            out.append(CapPlan(cap, True))
    return out


SLOW_PATH_RATIO = 4.0
"""A 16-bit matrix product this many times slower than fp32's (or more) runs without kernels for it. With
kernels a 16-bit product takes about fp32's time or less; through the conversion path (no kernels, or under the AVX2
cap) tens of times more: the threshold sits far from both. `python -m foxlib.memory.cpu_support kernels fp16|bf16`
probes this CPU."""

_PROBE_SHAPE = (256, 256, 256)  # (m, k, n): 17 M multiply-adds, about 12 ms on the slow path


@dataclass(frozen=True)
class KernelSpeed:
    """One matrix product in `precision` against fp32 on this CPU, in this process (under its caps)."""
    precision: str
    ratio: float  # the 16-bit product's time over fp32's (best of a few)
    capability: str  # torch.backends.cpu.get_cpu_capability() while timed

    @property
    def fast(self) -> bool:
        return self.ratio < SLOW_PATH_RATIO

    def to_dict(self) -> dict:
        return {"precision": self.precision, "ratio": self.ratio, "capability": self.capability,
                "fast": self.fast, "slow_path_ratio": SLOW_PATH_RATIO}

    def reason(self) -> str:
        return (f"this CPU has no {self.precision} matrix-product kernels (ATen capability {self.capability}): "
                f"a {self.precision} product took {self.ratio:,.0f}x fp32's time here, so a step would take minutes")


@functools.lru_cache(maxsize=None)
def kernel_speed(precision: str) -> KernelSpeed:
    """One (256 x 256) @ (256 x 256) product in `precision` against fp32, on one thread (several threads' wake-ups
    make fp32's time vary tenfold): best of 5 after two warm-ups; cached for the process."""
    import torch
    dtypes = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    if precision not in dtypes:
        raise ValueError(f"unknown precision {precision!r}; valid: {', '.join(dtypes)}")
    m, k, n = _PROBE_SHAPE
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(m, k, generator=gen), torch.randn(k, n, generator=gen)

    def best(dtype) -> float:
        x, y = a.to(dtype), b.to(dtype)
        x @ y, x @ y
        return min(timeit.repeat(lambda: x @ y, repeat=5, number=1))

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ratio = 1.0 if precision == "fp32" else best(dtypes[precision]) / best(torch.float32)
    finally:
        torch.set_num_threads(threads)
    return KernelSpeed(precision, ratio, torch.backends.cpu.get_cpu_capability())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["caps"]:
        # one line per cap, `RUN <dnnl> <aten>` or `SKIP <dnnl> <aten> <reason>` (scripts/test-isa.sh reads it)
        for plan in runnable_caps(cpu_flags()):
            print(f"{'RUN' if plan.runs else 'SKIP'} {plan.cap.dnnl} {plan.cap.aten} {plan.reason}".rstrip())
        return 0
    if len(argv) == 2 and argv[0] == "kernels":
        print(kernel_speed(argv[1]).to_dict())
        return 0
    print("usage: python -m foxlib.memory.cpu_support caps | kernels fp16|bf16", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
