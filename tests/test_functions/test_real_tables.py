import numpy as np
import pytest

from botorch_transfer.test_functions.real_tables import (
    FAMILIES,
    N_REPLICATES,
    load_table,
)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_shipped_tables_cover_the_grid(family):
    fam = FAMILIES[family]
    for task in fam.tasks:
        table = load_table(family, task)
        assert table.shape == (fam.grid_size**fam.dim, N_REPLICATES)
        assert np.isfinite(table).all()
        assert (table >= 0).all() and (table <= 100).all()
        # real replicate noise: rows are not constant across the grid
        assert (np.ptp(table, axis=1) > 0).mean() > 0.2


def test_bad_names_are_refused():
    with pytest.raises(ValueError, match="`family`"):
        load_table("gbm", "wine")
    with pytest.raises(ValueError, match="`task`"):
        load_table("forest", "digit3")
