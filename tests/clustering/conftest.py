import pytest
import torch


@pytest.fixture(autouse=True, scope="package")
def _one_thread():
    r"""Many small eigenvalue problems: on the shared 2-core machine oversubscribed BLAS
    threads make them ~10x slower. Restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
