r"""YAHPO Gym surrogate benchmarks, called directly with ``onnxruntime``.

The ``yahpo-gym`` package pins old numpy/ConfigSpace versions, so we read its data
folder ourselves: ``config_space.json`` (ranges, log scales), ``encoding.json``
(category codes) and ``model.onnx`` (inputs ``x_cat`` int32 and ``x_cont`` float32
in raw units; output ``batch x n_targets``). Install the runtime with
``pip install "botorch_transfer[yahpo]"``.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

#: Column orders of the surrogates' inputs and outputs (checked against yahpo-gym).
SCENARIOS = {
    "lcbench": {
        "instance": "OpenML_task_id",
        "cat": ["OpenML_task_id"],
        "cont": ["epoch", "batch_size", "learning_rate", "momentum", "weight_decay", "num_layers", "max_units", "max_dropout"],
        "targets": ["time", "val_accuracy", "val_cross_entropy", "val_balanced_accuracy", "test_cross_entropy", "test_balanced_accuracy"],
        "fidelity": {"epoch": 52},
    },
}


def default_data_dir() -> Path:
    r"""``$BOTORCH_TRANSFER_YAHPO_DIR``, else ``shared/data/yahpo`` next to the repository."""
    env = os.environ.get("BOTORCH_TRANSFER_YAHPO_DIR")
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parents[2]
    for candidate in (repo / "shared" / "data" / "yahpo", repo.parent / "shared" / "data" / "yahpo"):
        if candidate.exists():
            return candidate
    return repo.parent / "shared" / "data" / "yahpo"


@dataclass
class _Param:
    name: str
    lower: float
    upper: float
    log: bool
    integer: bool


class YahpoSurrogate:
    r"""One YAHPO scenario's surrogate over the unit cube of its tunable hyperparameters.

    Args:
        scenario: ``"lcbench"``.
        target: Output column to return (e.g. ``"val_accuracy"``).
        data_dir: Folder with one subfolder per scenario (default: :func:`default_data_dir`).

    Example:
        >>> bench = YahpoSurrogate("lcbench", "val_accuracy")
        >>> bench(bench.instances[0], torch.rand(5, bench.dim)).shape
        torch.Size([5, 1])
    """

    def __init__(self, scenario: str, target: str, data_dir: str | Path | None = None) -> None:
        if scenario not in SCENARIOS:
            raise ValueError(f"`scenario` must be one of {sorted(SCENARIOS)}, got {scenario!r}.")
        spec = SCENARIOS[scenario]
        if target not in spec["targets"]:
            raise ValueError(f"`target` must be one of {spec['targets']}, got {target!r}.")
        folder = Path(data_dir or default_data_dir()) / scenario
        if not (folder / "model.onnx").exists():
            raise FileNotFoundError(
                f"YAHPO data for {scenario!r} not found in {folder}; set BOTORCH_TRANSFER_YAHPO_DIR."
            )
        try:
            import onnxruntime
        except ImportError as e:
            raise ImportError("YAHPO problems need onnxruntime: pip install 'botorch_transfer[yahpo]'") from e
        self.scenario, self.spec, self.target = scenario, spec, target
        space = json.loads((folder / "config_space.json").read_text())
        self.encoding = json.loads((folder / "encoding.json").read_text())
        hps = {h["name"]: h for h in space["hyperparameters"]}
        self.params = [
            _Param(n, float(hps[n]["lower"]), float(hps[n]["upper"]), bool(hps[n].get("log")), hps[n]["type"] == "uniform_int")
            for n in spec["cont"] if n not in spec["fidelity"]
        ]
        choices = hps[spec["instance"]]["choices"]
        self.instances = [c for c in choices if c in self.encoding[spec["instance"]]]
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(str(folder / "model.onnx"), options)
        self._target_index = spec["targets"].index(target)

    @property
    def dim(self) -> int:
        return len(self.params)

    def decode(self, U: Tensor) -> dict[str, np.ndarray]:
        r"""Unit-cube points to raw hyperparameter values (log scales, rounded integers)."""
        U = U.detach().cpu().double().clamp(0, 1).numpy()
        out = {}
        for j, p in enumerate(self.params):
            if p.log:
                value = np.exp(math.log(p.lower) + U[:, j] * (math.log(p.upper) - math.log(p.lower)))
            else:
                value = p.lower + U[:, j] * (p.upper - p.lower)
            out[p.name] = np.clip(np.round(value), p.lower, p.upper) if p.integer else value
        return out

    def __call__(self, instance: str, U: Tensor) -> Tensor:
        r"""The surrogate's ``target`` at unit-cube points ``U`` (``n x dim``) on ``instance``."""
        if U.dim() != 2 or U.shape[-1] != self.dim:
            raise ValueError(f"`U` must have shape n x {self.dim}, got {tuple(U.shape)}.")
        raw = self.decode(U)
        n = U.shape[0]
        cont = np.stack(
            [np.full(n, self.spec["fidelity"][c], dtype=np.float64) if c in self.spec["fidelity"] else raw[c] for c in self.spec["cont"]],
            axis=1,
        ).astype(np.float32)
        codes = [self.encoding[c][instance] for c in self.spec["cat"]]
        cat = np.tile(np.array(codes, dtype=np.int32), (n, 1))
        out = self._session.run(None, {"x_cat": cat, "x_cont": cont})[0]
        return torch.as_tensor(out[:, self._target_index : self._target_index + 1], dtype=torch.float64)
