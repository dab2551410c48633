"""What this CPU can run (foxlib.memory.cpu_support): the ISA caps scripts/test-isa.sh runs under, and the
16-bit kernel probe the canonical CPU runs decide with."""
import os
import re
import subprocess
import sys

import pytest

from foxlib.core.config import ROOT
from foxlib.memory import cpu_support as cs

AVX2_ONLY = frozenset("fpu sse sse2 avx avx2 fma f16c bmi2".split())  # a 2-core EPYC without AVX-512
ZEN4 = AVX2_ONLY | {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd", "avx512_bf16", "avx512_vnni"}
SAPPHIRE_RAPIDS = ZEN4 | {"amx_tile", "amx_bf16", "amx_int8", "avx512_fp16"}


def plan(flags, env=None):
    return {p.cap.dnnl: p for p in cs.runnable_caps(flags, env or {})}


def test_flags_are_read_from_cpuinfo_text():
    text = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 fma avx512f\n\nprocessor\t: 1\nflags : sse\n"
    assert cs.cpu_flags(text) == {"fpu", "avx2", "fma", "avx512f"}
    assert cs.cpu_flags("no flags line here") == frozenset()


def test_an_avx2_only_cpu_runs_the_avx2_cap_and_skips_avx512_saying_what_it_lacks():
    p = plan(AVX2_ONLY)
    assert p["AVX2"].runs and p["AVX2"].reason == ""
    assert not p["AVX512_CORE_BF16"].runs
    assert "avx512_bf16" in p["AVX512_CORE_BF16"].reason and "avx512f" in p["AVX512_CORE_BF16"].reason
    assert "Illegal instruction" in p["AVX512_CORE_BF16"].reason


@pytest.mark.parametrize("flags", [ZEN4, SAPPHIRE_RAPIDS])
def test_an_avx512_bf16_cpu_runs_both_caps(flags):
    assert all(p.runs for p in plan(flags).values())


def test_avx512_without_bf16_is_skipped():
    p = plan(ZEN4 - {"avx512_bf16"})
    assert p["AVX2"].runs and not p["AVX512_CORE_BF16"].runs and "avx512_bf16" in p["AVX512_CORE_BF16"].reason


def test_a_cpu_below_avx2_runs_no_cap():
    p = plan(frozenset({"sse", "sse2", "avx"}))
    assert not any(x.runs for x in p.values())
    assert "avx2" in p["AVX2"].reason and "fma" in p["AVX2"].reason
    assert not any(x.runs for x in plan(frozenset()).values())  # nothing known: nothing is safe


@pytest.mark.parametrize("env, skipped", [
    ({"ATEN_CPU_CAPABILITY": "avx2"}, "ATEN_CPU_CAPABILITY=avx2"),
    ({"DNNL_MAX_CPU_ISA": "AVX2"}, "DNNL_MAX_CPU_ISA=AVX2"),
    ({"DNNL_MAX_CPU_ISA": "avx2", "ATEN_CPU_CAPABILITY": "AVX512"}, "DNNL_MAX_CPU_ISA=AVX2"),  # the lower one
])
def test_a_cap_already_set_in_the_environment_is_the_ceiling(env, skipped):
    p = plan(ZEN4, env)
    assert p["AVX2"].runs and not p["AVX512_CORE_BF16"].runs
    assert skipped in p["AVX512_CORE_BF16"].reason and "above the environment" in p["AVX512_CORE_BF16"].reason


def test_a_ceiling_at_or_above_the_cap_or_unknown_leaves_it():
    assert all(p.runs for p in plan(ZEN4, {"DNNL_MAX_CPU_ISA": "AVX512_CORE_AMX"}).values())
    assert all(p.runs for p in plan(ZEN4, {"ATEN_CPU_CAPABILITY": "avx512"}).values())
    assert all(p.runs for p in plan(ZEN4, {"ATEN_CPU_CAPABILITY": "nonsense"}).values())
    assert cs.environment_ceiling({"ATEN_CPU_CAPABILITY": "default"})[0] == 0  # below every cap
    assert not any(p.runs for p in plan(ZEN4, {"ATEN_CPU_CAPABILITY": "default"}).values())


def test_kernel_speed_is_a_threshold_on_the_ratio():
    assert cs.KernelSpeed("bf16", 0.47, "AVX512").fast
    slow = cs.KernelSpeed("fp16", 31.9, "AVX512")
    assert not slow.fast and "no fp16 matrix-product kernels" in slow.reason() and "32x" in slow.reason()
    assert not cs.KernelSpeed("fp16", cs.SLOW_PATH_RATIO, "AVX2").fast
    assert cs.kernel_speed("fp32").ratio == 1.0 and cs.kernel_speed("fp32").fast
    with pytest.raises(ValueError, match="valid: fp32, fp16, bf16"):
        cs.kernel_speed("fp8")


def test_kernel_speed_measures_a_positive_ratio_here():
    speed = cs.kernel_speed("bf16")
    assert speed.ratio > 0 and speed.capability
    assert speed.to_dict()["fast"] == speed.fast


@pytest.mark.slow
def test_the_script_runs_the_caps_the_environment_allows_and_says_why_it_skips():
    """scripts/test-isa.sh under an AVX2 ceiling (as an AVX2-only CPU, or its emulation): the AVX2 cap runs,
    the AVX-512 cap is skipped with its reason; a failing pytest run under a cap fails the script."""
    test = "tests/test_cpu_support.py::test_flags_are_read_from_cpuinfo_text"  # one quick test, not the files
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2", "DNNL_MAX_CPU_ISA": "AVX2", "PYTHON": sys.executable,
           "ISA_TESTS": test}
    ok = subprocess.run(["bash", "scripts/test-isa.sh"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "=== ISA cap: DNNL_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2" in ok.stdout
    assert "AVX512_CORE_BF16 ATEN_CPU_CAPABILITY=avx512: SKIPPED, above the environment's own cap" in ok.stdout
    assert "test-isa: passed under: AVX2; skipped: AVX512_CORE_BF16" in ok.stdout
    assert re.search(r"^1 passed\b", ok.stdout, re.M)  # the one test asked for, under the cap
    bad = subprocess.run(["bash", "scripts/test-isa.sh", "-k", "no_test_has_this_name"], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "test-isa: failed under: AVX2" in bad.stdout
