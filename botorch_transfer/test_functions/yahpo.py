r"""YAHPO Gym surrogate benchmarks, called directly with ``onnxruntime``.

The ``yahpo-gym`` package pins old numpy/ConfigSpace versions, so we read its data
folder ourselves: ``config_space.json`` (ranges, log scales), ``encoding.json``
(category codes) and ``model.onnx`` (inputs ``x_cat`` int32 and ``x_cont`` float32
in raw units; output ``batch x n_targets``). Install the runtime with
``pip install "botorch_transfer[yahpo]"``.

Inactive hyperparameters (conditions in ``config_space.json``, e.g. ``eta`` only for
``booster in {gbtree, dart}``) are imputed exactly as yahpo-gym 1.0.2 does in
``BenchmarkSet._config_to_xs``: a missing continuous value becomes ``0`` and a
missing categorical one ``"#na#"`` (code 0 of every ``encoding.json`` column).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

#: Column orders of the surrogates' inputs and outputs (checked against yahpo-gym).
#: The outputs of every rbv2 surrogate, in its column order.
RBV2_TARGETS = [
    "acc",
    "bac",
    "auc",
    "brier",
    "f1",
    "logloss",
    "timetrain",
    "timepredict",
    "memory",
]

SCENARIOS = {
    "lcbench": {
        "instance": "OpenML_task_id",
        "cat": ["OpenML_task_id"],
        "cont": [
            "epoch",
            "batch_size",
            "learning_rate",
            "momentum",
            "weight_decay",
            "num_layers",
            "max_units",
            "max_dropout",
        ],
        "targets": [
            "time",
            "val_accuracy",
            "val_cross_entropy",
            "val_balanced_accuracy",
            "test_cross_entropy",
            "test_balanced_accuracy",
        ],
        "fidelity": {"epoch": 52},
    },
    # rbv2_xgboost: the booster is tuned (one unit-cube coordinate split into equal
    # sub-intervals in the order of config_space.json: gblinear, gbtree, dart);
    # the imputation method (a preprocessing choice, not an XGBoost hyperparameter) is
    # fixed to its config-space default; fidelities at their maxima.
    "rbv2_xgboost": {
        "instance": "task_id",
        "cat": ["task_id", "booster", "num.impute.selected.cpo"],
        "cont": [
            "nrounds",
            "eta",
            "gamma",
            "lambda",
            "alpha",
            "subsample",
            "max_depth",
            "min_child_weight",
            "colsample_bytree",
            "colsample_bylevel",
            "rate_drop",
            "skip_drop",
            "trainsize",
            "repl",
        ],
        "targets": RBV2_TARGETS,
        "fidelity": {"trainsize": 1.0, "repl": 10},
        "tuned_cat": ["booster"],
        "fixed_cat": {"num.impute.selected.cpo": "impute.mean"},
    },
    # rbv2_rpart: only four rpart hyperparameters, so the imputation method is tuned
    # (one unit-cube coordinate, sub-intervals in config_space.json's order:
    # impute.mean, impute.median, impute.hist) to give a 5-D space; no
    # conditions, so nothing is imputed; fidelities at their maxima as rbv2_xgboost.
    "rbv2_rpart": {
        "instance": "task_id",
        "cat": ["task_id", "num.impute.selected.cpo"],
        "cont": ["cp", "maxdepth", "minbucket", "minsplit", "trainsize", "repl"],
        "targets": RBV2_TARGETS,
        "fidelity": {"trainsize": 1.0, "repl": 10},
        "tuned_cat": ["num.impute.selected.cpo"],
    },
}

#: yahpo-gym's values for inactive hyperparameters (``BenchmarkSet._config_to_xs``).
INACTIVE_CONT, INACTIVE_CAT = 0.0, "#na#"


def default_data_dir() -> Path:
    r"""``$BOTORCH_TRANSFER_YAHPO_DIR``, else ``shared/data/yahpo`` next to the
    repository."""
    env = os.environ.get("BOTORCH_TRANSFER_YAHPO_DIR")
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parents[2]
    for candidate in (
        repo / "shared" / "data" / "yahpo",
        repo.parent / "shared" / "data" / "yahpo",
    ):
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
    choices: tuple[
        str, ...
    ] = ()  # a categorical parameter: equal sub-intervals of [0, 1]


def _condition_holds(condition: dict, value: object) -> bool:
    if condition["type"] == "EQ":
        return value == condition["value"]
    if condition["type"] == "IN":
        return value in condition["values"]
    raise NotImplementedError(f"Condition type {condition['type']!r} is not supported.")


class YahpoSurrogate:
    r"""One YAHPO scenario's surrogate over the unit cube of its tunable
    hyperparameters.

    Coordinates follow ``SCENARIOS[scenario]``: first the tuned categoricals
    (``tuned_cat``; choice ``k`` of ``c`` for ``u`` in ``[k/c, (k+1)/c)``, ``u = 1``
    the last), then the non-fidelity continuous parameters in the surrogate's column
    order (log scales, integers rounded). Parameters inactive under the chosen
    categoricals are imputed as yahpo-gym does (``0`` / ``"#na#"``); their coordinates
    are then ignored.

    Args:
        scenario: ``"lcbench"``, ``"rbv2_xgboost"`` or ``"rbv2_rpart"``.
        target: Output column to return (e.g. ``"val_accuracy"``).
        data_dir: Folder with one subfolder per scenario (default:
            :func:`default_data_dir`).

    Example:
        >>> bench = YahpoSurrogate("lcbench", "val_accuracy")
        >>> bench(bench.instances[0], torch.rand(5, bench.dim)).shape
        torch.Size([5, 1])
    """

    def __init__(
        self, scenario: str, target: str, data_dir: str | Path | None = None
    ) -> None:
        if scenario not in SCENARIOS:
            raise ValueError(
                f"`scenario` must be one of {sorted(SCENARIOS)}, got {scenario!r}."
            )
        spec = SCENARIOS[scenario]
        if target not in spec["targets"]:
            raise ValueError(
                f"`target` must be one of {spec['targets']}, got {target!r}."
            )
        folder = Path(data_dir or default_data_dir()) / scenario
        if not (folder / "model.onnx").exists():
            raise FileNotFoundError(
                f"YAHPO data for {scenario!r} not found in {folder}; "
                "set BOTORCH_TRANSFER_YAHPO_DIR."
            )
        try:
            import onnxruntime
        except ImportError as e:
            raise ImportError(
                "YAHPO problems need onnxruntime: pip install 'botorch_transfer[yahpo]'"
            ) from e
        self.scenario, self.spec, self.target = scenario, spec, target
        space = json.loads((folder / "config_space.json").read_text())
        self.encoding = json.loads((folder / "encoding.json").read_text())
        hps = {h["name"]: h for h in space["hyperparameters"]}
        self.params = [
            _Param(n, 0.0, 1.0, False, False, tuple(hps[n]["choices"]))
            for n in spec.get("tuned_cat", [])
        ] + [
            _Param(
                n,
                float(hps[n]["lower"]),
                float(hps[n]["upper"]),
                bool(hps[n].get("log")),
                hps[n]["type"] == "uniform_int",
            )
            for n in spec["cont"]
            if n not in spec["fidelity"]
        ]
        #: child parameter -> its activation conditions (all must hold)
        self.conditions: dict[str, list[dict]] = {}
        for c in space.get("conditions", []):
            if "child" not in c or "parent" not in c:
                raise NotImplementedError(
                    f"Only simple parent/child conditions are supported, got {c}."
                )
            self.conditions.setdefault(c["child"], []).append(c)
        choices = hps[spec["instance"]]["choices"]
        self.instances = [c for c in choices if c in self.encoding[spec["instance"]]]
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(
            str(folder / "model.onnx"), options
        )
        self._target_index = spec["targets"].index(target)

    @property
    def dim(self) -> int:
        return len(self.params)

    def decode(self, U: Tensor) -> dict[str, np.ndarray]:
        r"""Unit-cube points to raw hyperparameter values (log scales, rounded integers,
        categoricals as arrays of choice names), before imputation of inactive ones."""
        U = U.detach().cpu().double().clamp(0, 1).numpy()
        out = {}
        for j, p in enumerate(self.params):
            if p.choices:
                k = np.minimum(
                    np.floor(U[:, j] * len(p.choices)).astype(int), len(p.choices) - 1
                )
                out[p.name] = np.array(p.choices, dtype=object)[k]
                continue
            if p.log:
                value = np.exp(
                    math.log(p.lower)
                    + U[:, j] * (math.log(p.upper) - math.log(p.lower))
                )
            else:
                value = p.lower + U[:, j] * (p.upper - p.lower)
            out[p.name] = (
                np.clip(np.round(value), p.lower, p.upper) if p.integer else value
            )
        return out

    def active(self, raw: dict[str, np.ndarray], name: str) -> np.ndarray:
        r"""Whether ``name`` is active (all its conditions hold) for each decoded
        point."""
        n = len(next(iter(raw.values()))) if raw else 0
        mask = np.ones(n, dtype=bool)
        for condition in self.conditions.get(name, []):
            parent = raw[condition["parent"]]
            mask &= np.array(
                [_condition_holds(condition, v) for v in parent], dtype=bool
            )
        return mask

    def surrogate_inputs(
        self,
        instance: str,
        U: Tensor,
        fidelity: Mapping[str, float | np.ndarray] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        r"""The surrogate's ``(x_cat int32 n x n_cat, x_cont float32 n x n_cont)`` at
        unit-cube points ``U`` on ``instance``: fidelities and fixed categoricals set,
        inactive parameters imputed as yahpo-gym does.

        Args:
            instance: The task (one of ``instances``).
            U: ``n x dim`` unit-cube points.
            fidelity: Fidelity values in place of the scenario's maxima, by name
                (e.g. ``{"repl": r}`` for rbv2's resampling replicate ``r`` in
                ``1..10``): a number, or one value per point.
        """
        if U.dim() != 2 or U.shape[-1] != self.dim:
            raise ValueError(
                f"`U` must have shape n x {self.dim}, got {tuple(U.shape)}."
            )
        if instance not in self.instances:
            raise ValueError(
                f"`instance` {instance!r} is not an instance of {self.scenario!r}."
            )
        fidelity = {**self.spec["fidelity"], **(fidelity or {})}
        if unknown := set(fidelity) - set(self.spec["fidelity"]):
            raise ValueError(
                f"`fidelity` names {sorted(unknown)}, not fidelities of "
                f"{self.scenario!r} ({sorted(self.spec['fidelity'])})."
            )
        raw = self.decode(U)
        n = U.shape[0]
        fidelity = {c: np.asarray(v, dtype=np.float64) for c, v in fidelity.items()}
        for c, value in fidelity.items():
            if value.ndim > 1 or (value.ndim == 1 and value.shape[0] != n):
                raise ValueError(
                    f"`fidelity[{c!r}]` must be a number or one value per point "
                    f"({n}), got shape {value.shape}."
                )
        fixed = self.spec.get("fixed_cat", {})
        for name, value in fixed.items():
            raw[name] = np.full(n, value, dtype=object)
        raw[self.spec["instance"]] = np.full(n, instance, dtype=object)
        columns = []
        for c in self.spec["cont"]:
            value = np.broadcast_to(fidelity[c], (n,)) if c in fidelity else raw[c]
            columns.append(np.where(self.active(raw, c), value, INACTIVE_CONT))
        cont = np.stack(columns, axis=1).astype(np.float32)
        cat = np.stack(
            [
                np.array(
                    [
                        self.encoding[c][v]
                        for v in np.where(self.active(raw, c), raw[c], INACTIVE_CAT)
                    ],
                    dtype=np.int32,
                )
                for c in self.spec["cat"]
            ],
            axis=1,
        )
        return cat, cont

    def __call__(
        self,
        instance: str,
        U: Tensor,
        fidelity: Mapping[str, float | np.ndarray] | None = None,
    ) -> Tensor:
        r"""The surrogate's ``target`` at unit-cube points ``U`` (``n x dim``) on
        ``instance``, at the scenario's maximal fidelities or at ``fidelity`` (see
        :meth:`surrogate_inputs`)."""
        cat, cont = self.surrogate_inputs(instance, U, fidelity)
        out = self._session.run(None, {"x_cat": cat, "x_cont": cont})[0]
        return torch.as_tensor(
            out[:, self._target_index : self._target_index + 1], dtype=torch.float64
        )
