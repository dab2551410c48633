"""foxlib.harness.training.train_many: runs in worker processes are the runs made alone, in the jobs' order."""
import pytest
import torch

from foxlib.harness import training
from foxlib.harness.training import accuracy_config, auto_workers, train_many, train_tft

JOB = dict(max_steps=4, eval_every=2, patience=2, val_windows=16)


def _jobs():
    cfg = accuracy_config("small", batch_size=4)
    return [{"cfg": cfg, "precision": "fp32", "seed": s, **JOB} for s in (1, 0)]


def test_auto_workers_one_on_the_cpu_several_on_a_gpu():
    assert auto_workers(10, "cpu") == 1
    assert 1 <= auto_workers(10, "cuda") <= 8 and auto_workers(1, "cuda") == 1


def test_in_process_runs_are_train_tft_and_say_how_many_ran_at_once(monkeypatch):
    """Each run's own record says how many runs shared the device: train_tft makes it so (the job carries the
    figure), in this process as in a worker; nothing is patched onto its dict afterwards."""
    made = []

    def run(*args, **kwargs):
        made.append(train_tft(*args, **kwargs))
        return made[-1]
    monkeypatch.setattr(training, "train_tft", run)
    out = train_many(_jobs(), "cpu")
    alone = train_tft(_jobs()[0]["cfg"], seed=1, show_progress=False, **JOB).to_dict()
    assert [r["seed"] for r in out] == [1, 0]
    assert out[0]["metrics"] == alone["metrics"] and out[0]["history"] == alone["history"]
    assert [r.harness.concurrent_runs for r in made] == [1, 1] and out[0]["harness"]["concurrent_runs"] == 1
    assert out == [r.to_dict() for r in made] and alone["harness"].get("concurrent_runs") is None
    with pytest.raises(ValueError, match="workers must be"):
        train_many(_jobs(), "cpu", workers=-1)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; this machine has none (spawning "
                    "worker processes on the CPU costs ~25 s of imports for a test)")
def test_runs_in_worker_processes_equal_the_runs_alone():
    pooled = train_many(_jobs(), "cuda", workers=2)
    alone = train_many(_jobs(), "cuda", workers=1)
    assert [r["seed"] for r in pooled] == [1, 0]
    for p, a in zip(pooled, alone):
        assert p["metrics"] == pytest.approx(a["metrics"], rel=1e-3)  # cuDNN may pick other kernels
        assert p["best_step"] == a["best_step"]
    assert {r["harness"]["concurrent_runs"] for r in pooled} == {2}
