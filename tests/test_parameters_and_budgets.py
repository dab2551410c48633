import pytest

from foxlib.core.config import ROOT
from foxlib.core.budgets import BudgetsError, Check, load_budgets, verdict
from foxlib.core.parameters import ParameterError, read_parameters, resolve
from foxlib.core.critical_path import WAVES, get_wave


def test_wave_8_10_declares_its_parameters_with_types_and_help():
    declared = read_parameters(WAVES["8.10"].notebook)
    assert declared["batch_size"].type == "int" and declared["batch_size"].default == 32
    assert declared["encoder_length"].default == 60
    assert declared["precision"].default == "fp32"
    assert declared["ensemble"].type == "bool"
    assert all(p.help for p in declared.values())


def test_overrides_are_typed_and_unknown_names_are_errors():
    declared = read_parameters(WAVES["8.10"].notebook)
    values = resolve(declared, {"batch_size": "8", "ensemble": "false"})
    assert values["batch_size"] == 8 and values["ensemble"] is False
    with pytest.raises(ParameterError, match=r"unknown parameter\(s\) batchsize; batchsize: did you mean "
                                              "batch_size\?; valid parameters: preset"):
        resolve(declared, {"batchsize": "8"})
    with pytest.raises(ParameterError, match=r"batchsize, zzz; batchsize: did you mean batch_size\?; valid"):
        resolve(declared, {"batchsize": "8", "zzz": "1"})
    with pytest.raises(ParameterError, match="batch_size.*must be int.*'eight'"):
        resolve(declared, {"batch_size": "eight"})


def test_unknown_wave_names_the_valid_ones():
    with pytest.raises(ValueError, match="valid waves: 8.10, 8.11, 8.12, 8.13"):
        get_wave("8.9")


def test_project_budgets_are_the_seeds():
    b = load_budgets()
    assert b["tft"] == {"parameters_mb": 300, "forward_activations_mb": 200, "gradients_mb": 200,
                        "optimizer_state_mb": 200, "peak_training_mb": 1000}


@pytest.mark.parametrize("text, message", [
    ("[tft]\nparameters_mb = 300\n", "is missing"),
    ("[tft\n", "not valid TOML"),
    (open(ROOT / "budgets.toml").read().replace("peak_training_mb = 1000", "peak_training_mb = -1"),
     "peak_training_mb must be a positive number"),
    (open(ROOT / "budgets.toml").read().replace("peak_training_mb = 1000", 'peak_training_mb = "1 GB"'),
     "must be a positive number"),
    (open(ROOT / "budgets.toml").read() + "\n[tft2]\n", "section \\[tft2\\] is not a known section"),
    (open(ROOT / "budgets.toml").read(), ""),
])
def test_bad_budgets_files_say_what_is_wrong(tmp_path, text, message):
    path = tmp_path / "budgets.toml"
    path.write_text(text)
    if not message:
        assert load_budgets(path)["tft"]["peak_training_mb"] == 1000
        return
    with pytest.raises(BudgetsError, match=message):
        load_budgets(path)


def test_missing_budgets_file(tmp_path):
    with pytest.raises(BudgetsError, match="not found"):
        load_budgets(tmp_path / "nope.toml")


def test_verdict_is_go_only_when_every_check_passes():
    ok = Check.at_most("a", 1, 2, "bytes")
    bad = Check.at_most("b", 3, 2, "bytes")
    assert ok.passed and not bad.passed
    assert verdict([ok]) == "GO"
    assert verdict([ok, bad]) == "NO-GO"
    assert verdict([]) == "NO-GO"


def test_assignments_written_as_flags_read_back_as_given():
    from foxlib.core.parameters import p_flags, parse_assignments, split_parameters, to_assignments
    values = {"quick": True, "strategies": "fp32 (baseline);bf16", "batch_size": 8, "name": "it's"}
    assert to_assignments(values) == ["quick=true", "strategies=fp32 (baseline);bf16", "batch_size=8", "name=it's"]
    line = p_flags(to_assignments(values))
    assert line.startswith("-p quick=true -p 'strategies=fp32 (baseline);bf16' -p batch_size=8 -p ")
    words = split_parameters(line)  # as the shell splits the command line
    assert words[::2] == ["-p"] * 4
    assert parse_assignments(words[1::2]) == {"quick": "true", "strategies": "fp32 (baseline);bf16",
                                             "batch_size": "8", "name": "it's"}
