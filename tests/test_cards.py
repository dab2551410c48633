"""Which card fits: hand-made figures, boundaries, sources; wave 8.13's committed measurement."""
import pytest

from foxlib.waves.wave_8_13 import cards
from foxlib.waves.wave_8_13.cap import GIB
from foxlib.waves.wave_8_13.cards import CARDS, Footprint, ModelFigures
from foxlib.waves.wave_8_13.records import Measurement
from tests.conftest import committed, committed_measurement, step_profile

HEADROOM = 500 * 10**6


def _fp(name="c", training=1 * GIB, serving=1 * GIB, source="predicted", **kw):
    return Footprint(name, source, training, serving, **kw)


def test_cards_are_real_sizes_in_gib():
    assert [c.memory_gb for c in CARDS] == [4, 6, 8, 12, 16, 24]
    assert CARDS[0].memory_bytes == 4_294_967_296  # budgets.toml's "4 GB" card
    assert [c.bf16 for c in CARDS] == [False, False, True, True, True, True]


def test_a_configuration_that_fits_8_gb_but_not_6():
    t = cards.fits([_fp("big", training=7 * 10**9, serving=6 * 10**9)], HEADROOM)
    four, six, eight = t.cell("big", 4), t.cell("big", 6), t.cell("big", 8)
    assert not four.trains and not four.serves
    assert not six.trains and six.training_free_bytes == 6 * GIB - 7 * 10**9 < 0
    assert not six.serves and six.serving_limit_bytes == 6 * GIB - HEADROOM < 6 * 10**9
    assert eight.trains and eight.serves and eight.training_free_bytes == 8 * GIB - 7 * 10**9
    assert all(t.cell("big", g).trains and t.cell("big", g).serves for g in (12, 16, 24))


def test_training_and_serving_boundaries():
    card = CARDS[0].memory_bytes
    at = cards.fits([_fp("at", training=card, serving=card - HEADROOM)], HEADROOM)
    over = cards.fits([_fp("over", training=card + 1, serving=card - HEADROOM + 1)], HEADROOM)
    c = at.cell("at", 4)
    assert c.trains and c.serves and c.training_free_bytes == 0
    o = over.cell("over", 4)
    assert not o.trains and not o.serves
    assert over.cell("over", 6).trains and over.cell("over", 6).serves


def test_measured_only_on_the_emulated_card_predicted_elsewhere():
    measured = _fp("seed", training=2 * 10**9, serving=1.5 * 10**9, source="measured", card_bytes=4 * GIB)
    predicted = _fp("seed", training=int(2.1e9), serving=int(1.6e9))
    t = cards.fits([measured, predicted], HEADROOM)
    assert t.cell("seed", 4).footprint.source == "measured" and t.cell("seed", 4).footprint.training_bytes == 2 * 10**9
    assert {t.cell("seed", g).footprint.source for g in (6, 8, 12, 16, 24)} == {"predicted"}
    frame = cards.card_frame(t)
    assert frame.shape == (2, 2 + len(CARDS))
    assert frame.iloc[0]["GeForce GTX 1650 (4 GB)"].endswith("(measured)")
    assert frame.iloc[0]["GeForce RTX 2060 (6 GB)"].endswith("(predicted)")
    only = cards.fits([measured], HEADROOM)
    assert only.cell("seed", 4) is not None and only.cell("seed", 8) is None
    assert cards.card_frame(only).iloc[0]["GeForce RTX 3070 (8 GB)"] == "— (no figure)"


def test_an_out_of_memory_run_does_not_fit_whatever_its_figure():
    fp = _fp("oom", training=10**9, serving=10**9, source="measured", card_bytes=4 * GIB, training_ran=False)
    c = cards.fits([fp], HEADROOM).cell("oom", 4)
    assert not c.trains and c.serves and "out of memory" in c.reason


def test_bf16_needs_ampere():
    t = cards.fits([_fp("bf16", precisions=("bf16", "fp32"))], HEADROOM)
    assert not t.cell("bf16", 4).trains and "compute capability" in t.cell("bf16", 4).reason
    assert t.cell("bf16", 8).trains


def test_cell_text_says_margin_and_source():
    t = cards.fits([_fp("x", training=5 * 10**9, serving=int(3.9e9))], HEADROOM)
    text = cards.cell_text(t.cell("x", 4), "trains", HEADROOM)
    assert text == "no: 5,000.0 of 4,295.0 MB, 705.0 MB short (predicted)"
    serve = cards.cell_text(t.cell("x", 4), "serves", HEADROOM)
    assert serve == "no: 3,900.0 of 4,295.0 MB, 395.0 MB free, 105.0 MB under the 500.0 MB headroom (predicted)"


def test_predicted_footprint_sums_as_8_13_accounts():
    a = ModelFigures("a", "fp32", step_peak_bytes=100, kept_bytes=40, optimizer_state_bytes=10, serve_bytes=30)
    b = ModelFigures("b", "fp32", step_peak_bytes=500, kept_bytes=200, optimizer_state_bytes=80, serve_bytes=60)
    fp = cards.predicted_footprint("c", [a, b], context_bytes=1000, workspace_bytes=7)
    # steady state: b stepping beside a's 40 = 540 > a stepping beside b's 200 = 300
    assert fp.training_bytes == 540 + 7 + 1000
    assert fp.serving_bytes == 30 + 60 + 3 * 7 + 1000  # default stream + one per model
    cached = cards.predicted_footprint("c", [a, b], context_bytes=1000, workspace_bytes=7,
                                       training_cache_bytes=11, serving_cache_bytes=13, streams=1)
    assert (cached.training_bytes, cached.serving_bytes) == (540 + 7 + 11 + 1000, 30 + 60 + 7 + 13 + 1000)
    # before a second round the first model's Adam state is missing: a one-step run accounts less
    # b first: it steps beside a's 40 − 10 = 30; only the second round has a's state beside it
    assert cards.accounted_training_bytes([b, a], steps=1) == 500 + 30
    assert cards.accounted_training_bytes([b, a], steps=2) == 500 + 40
    assert fp.source == "predicted" and fp.precisions == ("fp32",)


def test_model_figures_from_a_profile():
    prof = step_profile(peak=900, live_before_step=300, optimizer_state=100, parameters=50, batch=120,
                        forward_peak=700, buffers={"rollout": {"device_bytes": 100, "host_bytes": 0}})
    m = cards.model_figures("ppo", "fp32", prof)
    assert (m.step_peak_bytes, m.kept_bytes, m.optimizer_state_bytes) == (900, 300, 100)
    assert m.serve_bytes == 50 + 20 + 400


def test_bad_input_names_the_valid_choices():
    with pytest.raises(ValueError, match="valid: predicted, measured"):
        _fp(source="guessed")
    with pytest.raises(ValueError, match="card_bytes"):
        _fp(source="measured")
    t = cards.fits([_fp("x")], HEADROOM)
    with pytest.raises(ValueError, match="known: x"):
        t.cell("y", 4)
    with pytest.raises(ValueError, match="4 GB, 6 GB"):
        t.cell("x", 5)
    with pytest.raises(ValueError, match="2 predicted"):
        cards.fits([_fp("x"), _fp("x")], HEADROOM)


@pytest.mark.parametrize("device", ["h200", "cpu"])
def test_committed_8_13_measurement(device):
    m = committed(device, "8.13")
    rec = Measurement.from_dict(m)
    res = committed(device, "8.13", "results.json")
    fp = cards.measured_footprint("8.13's configuration", rec)
    members = cards.measured_members(rec)
    assert list(members) == m["order"]
    if not m["cap"]["enforced"]:
        over = cards.measured_overheads(rec)
        assert fp is None and (over.context_bytes, over.workspace_bytes, over.training_cache_bytes) == (0, 0, 0)
        assert "models' tensors only" in over.note
        return
    by_name = {c["name"]: c["measured"] for c in res["checks"]}
    assert fp.training_bytes == by_name["ensemble trains under the cap"]
    assert fp.serving_bytes == by_name["concurrent inference fits with the headroom"]
    assert fp.card_bytes == 4 * GIB
    over = cards.measured_overheads(rec)
    assert over.context_bytes >= m["cap"]["context_bytes"] > 0 and over.workspace_bytes > 0
    t = m["training"]
    assert over.training_cache_bytes == t["peak_bytes"] - t["peak_allocated_bytes"] >= 0
    assert "measured them on NVIDIA H200" in over.note
    name = cards.configuration_name(members, "seed")
    tft_precision = m["models"]["tft"]["precision"]
    assert name.startswith(f"seed: DQN fp32, PPO fp32, Mamba-2 fp32, TFT {tft_precision}")
    assert "memory_efficient=True" in name


def test_predict_configuration_of_one_small_model():
    from foxlib.memory.predict import predict_step
    from foxlib.models import MODELS
    members = {"dqn": cards.ensemble_members("small")["dqn"]}
    fp = cards.predict_configuration("dqn alone", members, context_bytes=1000, workspace_bytes=10)
    prof = predict_step(MODELS["dqn"], members["dqn"][0], target="cuda")
    assert fp.training_bytes == prof.peak + 10 + 1000  # one model: its own step peak
    assert fp.serving_bytes == cards.model_figures("dqn", "fp32", prof).serve_bytes + 2 * 10 + 1000
    assert 0 < prof.parameters < fp.serving_bytes - 1000


def test_table_for_measurement_with_predictions_stubbed(monkeypatch):
    """The one call a report makes: measured on the emulated card, predicted elsewhere, extras predicted."""
    m = committed_measurement("h200", "8.13")
    calls = []

    def fake(name, members, **kw):
        calls.append((name, kw))
        return cards.Footprint(name, "predicted", 5 * 10**9, 3 * 10**9, note=kw["note"])
    monkeypatch.setattr(cards, "predict_configuration", fake)
    extra = {"other": {}}
    t = cards.table_for_measurement(m, HEADROOM, extra=extra)
    main = t.configurations[0]
    assert t.configurations == (main, "other")
    four = t.cell(main, 4)
    assert four.footprint.source == "measured" and t.cell(main, 6).footprint.source == "predicted"
    if "bf16" in main:  # the 4 and 6 GB cards listed are Turing (7.5): no bf16, whatever the memory says
        assert not four.trains and "bf16 needs compute capability 8.0" in four.reason
    else:
        assert four.trains and not four.reason
    assert not t.cell("other", 4).trains and t.cell("other", 6).trains
    assert calls[0][1]["context_bytes"] == cards.measured_overheads(m).context_bytes
    assert any("measured them on NVIDIA H200" in note for _, _, note in t.notes)


def test_notes_name_the_configurations_they_hold_for():
    fps = [_fp("a", source="measured", card_bytes=4 * GIB, note="under the cap"),
           _fp("a", note="context measured"), _fp("b, light", note="context measured")]
    text = cards.notes_text(cards.fits(fps, HEADROOM))
    assert text.splitlines() == ["- measured (a): under the cap", "- predicted (every configuration): context measured"]


def test_report_section_is_the_measurement_and_the_alternatives(monkeypatch):
    """The 8.13 report's one call: the measured configuration and both alternatives, judged with the budgets'
    headroom (predictions stubbed: they take a minute)."""
    from foxlib.core.budgets import load_budgets
    m = committed_measurement("h200", "8.13")
    monkeypatch.setattr(cards, "predict_configuration",
                        lambda name, members, **kw: cards.Footprint(name, "predicted", 5 * 10**9, 3 * 10**9,
                                                                    note=kw["note"]))
    budgets = load_budgets()
    frame, notes = cards.report_section(m, budgets)
    assert frame.shape == (2 * 3, 2 + len(CARDS))  # the measured configuration and two alternatives
    assert frame.iloc[0]["GeForce GTX 1650 (4 GB)"].split("; ")[0].endswith("(measured)")
    assert frame.iloc[2]["GeForce GTX 1650 (4 GB)"] == "no: 5,000.0 of 4,295.0 MB, 705.0 MB short (predicted)"
    headroom = budgets["ensemble"]["min_headroom_mb"]
    assert frame.iloc[1]["phase"] == f"serves (all at once, ≥ {headroom:,.1f} MB free)"
    assert notes.startswith("- measured (seed: ") and "- predicted (every configuration): CUDA context" in notes


def test_a_prediction_fits_a_card_only_with_its_error_added():
    """A predicted footprint 5 % under a 4 GB card does not fit it: the predictor's 10 % peak tolerance is added
    before deciding; measured, the same bytes fit."""
    from foxlib.memory.tolerances import PEAK_TOLERANCE_PCT
    from foxlib.waves.wave_8_13.cards import CARDS, Footprint, cell_text, fits
    card = CARDS[0].memory_bytes
    near = int(card * 0.95)
    predicted = Footprint("c", "predicted", near, 0, training_margin=PEAK_TOLERANCE_PCT / 100)
    cell = fits([predicted], 0, CARDS[:1]).cell("c", 4)
    assert not cell.trains and cell.training_free_bytes == card - int(near * 1.1)
    assert "+ 10 % for the prediction's error" in cell_text(cell, "trains", 0)
    measured = Footprint("c", "measured", near, 0, card_bytes=card)
    assert fits([measured], 0, CARDS[:1]).cell("c", 4).trains
    far = Footprint("c", "predicted", int(card * 0.8), 0, training_margin=0.1)
    assert fits([far], 0, CARDS[:1]).cell("c", 4).trains


def test_the_margins_are_the_predictions_measured_errors_per_phase():
    """A run that measured its configuration on the card it emulated: each phase's margin is |measured - predicted|
    / predicted of that phase (training 1,100 against 1,000: 10 %; serving 600 against 500: 20 %; 450: 10 % under);
    without a complete run, the predictor's stated peak tolerance for both."""
    from foxlib.memory.tolerances import PEAK_TOLERANCE_PCT
    predicted = Footprint("c", "predicted", 1000, 500)
    measured = Footprint("c", "measured", 1100, 600, card_bytes=4 * GIB)
    margins, text = cards.prediction_margins(measured, predicted)
    assert margins == pytest.approx((0.1, 0.2))
    assert "training +10.00 %, serving +20.00 %" in text
    under = Footprint("c", "measured", 900, 450, card_bytes=4 * GIB)
    assert cards.prediction_margins(under, predicted)[0] == pytest.approx((0.1, 0.1))
    oom = Footprint("c", "measured", 1100, 600, card_bytes=4 * GIB, training_ran=False)
    for m in (None, oom):
        margins, text = cards.prediction_margins(m, predicted)
        assert margins == (PEAK_TOLERANCE_PCT / 100,) * 2 and "stated peak tolerance" in text


def test_each_phase_decides_with_its_own_margin():
    """Training 3,900 MB predicted with a 1 % error fits a 4 GB card (4,294.97 MB); serving 3,000 MB with a 40 % error
    (4,200 MB) does not leave 500 MB free: one phase's error does not decide the other."""
    from foxlib.waves.wave_8_13.cards import cell_text
    fp = Footprint("c", "predicted", 3_900_000_000, 3_000_000_000, training_margin=0.01, serving_margin=0.4)
    cell = cards.fits([fp], 500_000_000, CARDS[:1]).cell("c", 4)
    assert cell.trains and not cell.serves
    assert cell.training_free_bytes == CARDS[0].memory_bytes - 3_939_000_000
    assert "+ 40 % for the prediction's error = 4,200.0" in cell_text(cell, "serves", 500_000_000)
