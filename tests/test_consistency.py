"""The committed reports agree: one figure, one value; citations match the published files."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from foxlib.core import config
from foxlib.report.consistency import problems
from foxlib.core.figures import Figure, as_dict, display, key
from foxlib.core.provenance import sha256_of


def test_committed_reports_agree():
    found = problems(config.ROOT / "reports")
    assert found == [], "\n".join(found)


def test_committed_reports_name_commits_of_this_repository():
    """Every revision a committed report names (measured and rendered) is a commit here: a mistyped
    FOXLIB_GIT_REVISION would name none. A shallow clone, which cannot tell, skips."""
    from foxlib.core.provenance import is_commit
    named = {}
    for path in (config.ROOT / "reports").rglob("*.json"):
        if path.name in ("results.json", "peer-benchmark.json", "throughput-benchmark.json"):
            d = json.loads(path.read_text())
            named.update({d[k]: path for k in ("measured_at_revision", "rendered_at_revision") if d.get(k)})
    assert named
    told = {rev: is_commit(rev) for rev in named}
    if None in told.values():
        pytest.skip("this clone cannot tell commits (shallow, or no git)")
    assert [f"{rev} ({named[rev]})" for rev, ok in told.items() if not ok] == []


def _report(reports: Path, device: str, wave: str, figures: dict, page: str, **extra) -> Path:
    folder = reports / device / f"wave-{wave}"
    folder.mkdir(parents=True)
    res = {"wave": wave, "measured_at_revision": "abc1234", "rendered_at_revision": "abc1234",
           "figures": figures, **extra}
    (folder / "results.json").write_text(json.dumps(res))
    (folder / "report.md").write_text(page)
    return folder / "results.json"


PEAK = key("tft", "seed", 32, 60, "fp32", "model_peak")


def test_a_planted_contradiction_is_found(tmp_path):
    reports = tmp_path / "reports"
    _report(reports, "h200", "8.10", as_dict([Figure(PEAK, 1_009_444_352, "bytes")]), "peak 1,009.4 MB")
    _report(reports, "h200", "8.11", as_dict([Figure(PEAK, 1_009_444_352, "bytes")]), "| fp32 | 1,009.4 |")
    assert problems(reports) == []
    (reports / "h200" / "wave-8.11" / "results.json").write_text(json.dumps(
        {"wave": "8.11", "measured_at_revision": "abc1234", "rendered_at_revision": "abc1234",
         "figures": as_dict([Figure(PEAK, 938_000_000, "bytes")])}))
    found = problems(reports)
    assert any("938.0 MB" in p and "1,009.4 MB" in p for p in found), found


def test_a_figure_the_page_does_not_show_is_found(tmp_path):
    reports = tmp_path / "reports"
    _report(reports, "cpu", "8.10", as_dict([Figure(PEAK, 988_095_712, "bytes")]), "peak 2,318 MB")
    assert any("not shown" in p for p in problems(reports))


def test_a_check_the_page_writes_otherwise_is_found(tmp_path):
    """A check's value on the page as format_value writes it ("0.25 %"), not otherwise ("0.2 %")."""
    reports = tmp_path / "reports"
    check = {"name": "accuracy", "measured": 0.2495729381598863, "limit": 5.0, "unit": "%", "passed": True}
    _report(reports, "cpu", "8.11", {}, "accuracy 0.25 %", checks=[check])
    assert problems(reports) == []
    (reports / "cpu" / "wave-8.11" / "report.md").write_text("accuracy 0.2 %")
    assert [p for p in problems(reports) if "'accuracy' = 0.25 % is not shown" in p], problems(reports)


def test_the_same_key_on_two_devices_is_not_compared(tmp_path):
    reports = tmp_path / "reports"
    _report(reports, "cpu", "8.10", as_dict([Figure(PEAK, 988_095_712, "bytes")]), "988.1")
    _report(reports, "h200", "8.10", as_dict([Figure(PEAK, 1_009_444_352, "bytes")]), "1,009.4")
    assert problems(reports) == []


def test_a_citation_of_a_changed_file_is_found(tmp_path):
    reports = tmp_path / "reports"
    cited = _report(reports, "h200", "8.12", {}, "")
    citation = {"path": "reports/h200/wave-8.12/results.json", "revision": "abc1234", "sha256": sha256_of(cited)}
    _report(reports, "h200", "8.13", {}, "", depends_on=[citation])
    assert problems(reports) == []
    cited.write_text(cited.read_text().replace("abc1234", "def5678", 1))
    assert any("the cited file reports/h200/wave-8.12/results.json changed" in p for p in problems(reports))


def test_a_dirty_or_missing_revision_is_found(tmp_path):
    reports = tmp_path / "reports"
    path = _report(reports, "cpu", "8.10", {}, "")
    data = json.loads(path.read_text())
    data["measured_at_revision"] = "abc1234+dirty"
    del data["rendered_at_revision"]
    path.write_text(json.dumps(data))
    found = problems(reports)
    assert any("measured_at_revision" in p for p in found) and any("rendered_at_revision" in p for p in found)


def test_variants_and_work_folders_are_not_compared(tmp_path):
    reports = tmp_path / "reports"
    _report(reports, "cpu", "8.10", as_dict([Figure(PEAK, 988_095_712, "bytes")]), "988.1")
    variant = reports / "cpu" / "variants" / "wave-8.10-batch_size-8"
    shutil.copytree(reports / "cpu" / "wave-8.10", variant)
    (variant / "results.json").write_text((variant / "results.json").read_text().replace("988095712", "1"))
    assert problems(reports) == []


def test_figures_have_one_definition_and_one_display():
    assert display(1_009_444_352, "bytes") == "1,009.4 MB"
    assert display(0.0713, "s") == "71.3 ms"
    with pytest.raises(ValueError, match="no definition"):
        Figure("tft/seed/b32/t60/fp32/peak_with_something", 1, "bytes")
    with pytest.raises(ValueError, match="given twice"):
        as_dict([Figure(PEAK, 1, "bytes"), Figure(PEAK, 2, "bytes")])
