"""The exploration notebook (`make lab`) runs with a user's choices and shows predicted and measured."""
import re

import pytest

from foxlib.core.config import KERNEL_NAME, ROOT


@pytest.mark.parametrize("params", [
    {"model": "tft", "preset": "small", "precision": "bf16", "checkpointing": "blocks", "batch_size": 4},
    {"model": "mamba2", "preset": "small", "measure": False},
])
@pytest.mark.slow
def test_explore_notebook_shows_predicted_and_measured(tmp_path, params):
    import jupytext
    import nbformat
    import papermill

    from foxlib.run.runner import ensure_kernel
    ensure_kernel()
    source = tmp_path / "explore.ipynb"
    jupytext.write(jupytext.read(ROOT / "notebooks" / "explore.py"), source)
    papermill.execute_notebook(str(source), str(tmp_path / "out.ipynb"), parameters=params,
                               kernel_name=KERNEL_NAME, progress_bar=False, cwd=str(ROOT))
    nb = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    html = "".join(o.get("data", {}).get("text/html", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.outputs)
    assert "<td>predicted</td>" in html
    assert ("<td>measured</td>" in html) == params.get("measure", True)
    peaks = [float(x.replace(",", "")) for x in re.findall(r"<td>([\d,]+\.\d)</td>\s*</tr>", html)]
    assert peaks and all(p > 0 for p in peaks)


def test_a_choice_the_model_lacks_is_refused_not_dropped():
    """The explore notebook's choices through ModelCard.explore_config: Mamba-2's switch takes none or blocks,
    DQN has no checkpointing, PPO no memory-efficient path; the TFT takes its granularities."""
    from foxlib.models import MODELS
    assert MODELS["tft"].explore_config("small", 4, "vsn", True).checkpointing == "vsn"
    assert MODELS["mamba2"].explore_config("small", checkpointing="blocks").checkpointing is True
    assert MODELS["mamba2"].explore_config("small").checkpointing is False
    assert MODELS["dqn"].explore_config("small", 16).batch_size == 16
    for model, kw, says in (("mamba2", {"checkpointing": "all"}, "none or blocks, got 'all'"),
                            ("dqn", {"checkpointing": "blocks"}, "dqn has no checkpointing"),
                            ("ppo", {"memory_efficient": True}, "ppo has no memory-efficient path")):
        with pytest.raises(ValueError, match=says):
            MODELS[model].explore_config("small", **kw)
