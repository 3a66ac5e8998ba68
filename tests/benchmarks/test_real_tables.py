import numpy as np
import pytest

from benchmarks import real_tables
from botorch_transfer.test_functions.real_tables import FAMILIES, load_table


@pytest.mark.parametrize("family", list(FAMILIES))
def test_shipped_rows_are_what_the_builder_computes(family):
    fam = FAMILIES[family]
    task = fam.tasks[1]
    X, y = real_tables._dataset(task)
    configs = fam.configs()
    table = load_table(family, task)
    for row in (0, len(configs) // 2 + 3):
        computed = real_tables._ROWS[family](X, y, configs[row])
        np.testing.assert_allclose(computed, table[row], atol=1e-3)


def test_write_is_atomic_and_loadable(tmp_path, monkeypatch):
    monkeypatch.setattr(
        real_tables, "build_table", lambda family, task: np.ones((4, 2), np.float32)
    )
    path = real_tables.write_tables("forest", tmp_path / "forest.npz")
    with np.load(path) as tables:
        assert set(tables) == set(FAMILIES["forest"].tasks)
    assert [p.name for p in tmp_path.iterdir()] == ["forest.npz"]


def test_an_unknown_task_is_refused_by_the_builder():
    with pytest.raises(ValueError, match="`task`"):
        real_tables.build_table("forest", "digit3")
