"""The fp32 step each page's speed ratios rest on, side by side per device: one baseline per device and
revision is the aim, and where two pages' baselines disagree by more than their intervals the index says so.

Every speed ratio a page shows is against the fp32 step of its own run (alternating rounds: the drift of
the machine hits both). Two pages of one device may still time that same fp32 step very differently (a busy
machine, another CPU): then their ratios are not comparable with each other, even if each holds. A page lists
its baseline as a figure `tft/<preset>/b<batch>/t<T>/fp32/<page>/step_time` (seconds, with its interval and the
coverage that states: foxlib.harness.timing.median_interval); the peer benchmark's is its "foxlib TFT, default" row.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from foxlib.harness.timing import median_interval, short_coverage
from foxlib.report.index import canonical_pages

PEER_ROW = "foxlib_default"  # the peer benchmark's foxlib TFT at its default configuration, fp32


@dataclass(frozen=True)
class Baseline:
    """One page's fp32 step: its median and interval (seconds) with the interval's coverage, and the configuration it
    was timed at."""
    page: str
    """The page's results file, relative to the reports folder."""
    configuration: str
    """tft/<preset>/b<batch>/t<T>: pages compare only at one configuration."""
    revision: str
    machine: str
    """The device's name as the page records it (two CPU pages may come from two CPUs)."""
    median_s: float
    low_s: float
    high_s: float
    confidence: float | None
    """None: a results file written before intervals stated their coverage."""

    def text(self) -> str:
        return (f"{self.median_s * 1e3:,.1f} ms [{self.low_s * 1e3:,.1f}, {self.high_s * 1e3:,.1f}]"
                f"{short_coverage(self.confidence)}")


def machine(res: dict) -> str:
    return str((res.get("device") or {}).get("name") or "?")


def _from_results(rel: str, res: dict) -> list[Baseline]:
    out = []
    for k, fig in (res.get("figures") or {}).items():
        parts = k.split("/")
        if parts[-1] == "step_time" and len(parts) == 7 and parts[4] == "fp32" and fig.get("low") is not None:
            out.append(Baseline(rel, "/".join(parts[:4]), str(res.get("measured_at_revision", "?")),
                                machine(res), fig["value"], fig["low"], fig["high"], fig.get("confidence")))
    return out


def _from_peer(rel: str, res: dict) -> list[Baseline]:
    row = (res.get("variants") or {}).get(PEER_ROW) or {}
    samples = (row.get("timing") or {}).get("samples_s")
    cfg = res.get("config") or {}
    if not samples or row.get("precision") != "fp32" or not cfg:
        return []
    preset = (res.get("arguments") or {}).get("preset", "seed")
    return [Baseline(rel, f"tft/{preset}/b{cfg['batch_size']}/t{cfg['encoder_length']}",
                     str(res.get("measured_at_revision", "?")), machine(res), *median_interval(samples))]


def disagreements(baselines: list[Baseline]) -> list[str]:
    """Each pair of pages timed at one configuration whose fp32 intervals do not overlap, in words."""
    lines = []
    for i, a in enumerate(baselines):
        for b in baselines[i + 1:]:
            if a.configuration == b.configuration and (a.high_s < b.low_s or b.high_s < a.low_s):
                ratio = max(a.median_s, b.median_s) / min(a.median_s, b.median_s)
                machines = f" (measured on {a.machine} and on {b.machine})" if a.machine != b.machine else ""
                lines.append(f"{a.page} {a.text()} and {b.page} {b.text()} differ by {ratio:,.2f}x, beyond their "
                             f"intervals{machines}: their speed ratios rest on different baselines")
    return lines


def rows(reports_dir: Path) -> dict[str, dict[str, object]]:
    """For the index: per device with any, its canonical pages' fp32 baselines (reports/<device>/wave-*/results.json
    and the peer benchmark's JSON; variants are not read) and their disagreements."""
    found: dict[str, list[Baseline]] = {}
    for path, res in canonical_pages(reports_dir):
        rel = str(path.relative_to(reports_dir))
        page = _from_results(rel, res) if path.name == "results.json" else _from_peer(rel, res)
        found.setdefault(rel.split("/")[0], []).extend(page)
    return {d: {"baselines": b, "disagreements": disagreements(b)} for d, b in found.items() if b}
