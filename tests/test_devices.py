"""Where and with what a wave was measured (foxlib.memory.devices): the schema's Device and Environment records,
whose files are those the committed measurements hold byte for byte, on the CPU and on CUDA (stubbed: no GPU here)."""
import json
import platform
import types

import pytest
import torch

from foxlib.core.schema import Device, Environment
from foxlib.memory import cuda, devices
from tests.conftest import committed


def _as_measured(monkeypatch, device: str) -> tuple[dict, dict]:
    """The committed 8.10 measurement's device and environment on `device`, with this machine made to say the same:
    its CPU, or a stubbed CUDA device (properties, name, NVML's driver), versions, platform and revision."""
    data = committed(device, "8.10")
    dev, env = data["device"], data["environment"]
    if dev["type"] == "cuda":
        major, minor = dev["capability"].split(".")
        props = types.SimpleNamespace(total_memory=dev["total_memory_bytes"], major=int(major), minor=int(minor))
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: props)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda d: dev["name"])
        monkeypatch.setattr(cuda, "nvml_view", lambda d: {"available": True, "driver": env["driver"]})
    else:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        monkeypatch.setattr(devices, "cpu_name", lambda: dev["name"])
        monkeypatch.setattr(torch, "get_num_threads", lambda: dev["threads"])
    monkeypatch.setattr(platform, "python_version", lambda: env["python"])
    monkeypatch.setattr(platform, "platform", lambda: env["platform"])
    monkeypatch.setattr(torch, "__version__", env["torch"])
    monkeypatch.setattr(torch.version, "cuda", env["cuda"])
    monkeypatch.setenv("FOXLIB_GIT_REVISION", env["git_revision"])
    return dev, env


@pytest.mark.parametrize("device", ["cpu", "h200"])
def test_device_and_environment_are_records_that_write_what_was_measured(monkeypatch, device):
    dev, env = _as_measured(monkeypatch, device)
    described = devices.describe(torch.device("cuda", 0) if dev["type"] == "cuda" else torch.device("cpu"))
    made_with = devices.environment()
    assert isinstance(described, Device) and isinstance(made_with, Environment)
    assert json.dumps(described.to_dict()) == json.dumps(dev)  # the same keys in the same order: the same bytes
    assert json.dumps(made_with.to_dict()) == json.dumps(env)


def test_a_driver_nvml_does_not_name_is_not_written(monkeypatch):
    _, env = _as_measured(monkeypatch, "h200")
    monkeypatch.setattr(cuda, "nvml_view", lambda d: {"available": False, "note": "NVML could not start"})
    assert devices.environment().to_dict() == {k: v for k, v in env.items() if k != "driver"}
