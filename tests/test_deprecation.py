r"""Deprecation warnings point at the user's line: the first frame outside the
package, also through a subclass's ``super().__init__``."""

import warnings

import pytest
import torch

from botorch_transfer import DeltaBOModel, TaskData
from botorch_transfer._deprecation import renamed_keywords, user_stacklevel


def _source_and_target():
    gen = torch.Generator().manual_seed(0)
    X_s = torch.rand(20, 2, generator=gen, dtype=torch.float64)
    X = torch.rand(5, 2, generator=gen, dtype=torch.float64)
    return TaskData(X_s, X_s.sum(-1, keepdim=True)), X, X.sum(-1, keepdim=True)


class SubclassedDeltaBO(DeltaBOModel):
    def __init__(self, train_X, train_Y, source):
        super().__init__(train_X, train_Y, source=source, residual_covariance="full")


def test_a_keyword_passed_on_by_a_subclass_is_warned_at_the_subclass_line():
    source, X, Y = _source_and_target()
    with pytest.warns(DeprecationWarning, match="`residual_covariance`") as caught:
        SubclassedDeltaBO(X, Y, source)
    (warning,) = caught
    assert warning.filename == __file__
    source_line = SubclassedDeltaBO.__init__.__code__.co_firstlineno + 1
    assert warning.lineno == source_line


def test_a_direct_call_is_warned_at_the_callers_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert renamed_keywords("f", {"old": 1}, {"old": "new"}) == {"new": 1}
    assert [w.filename for w in caught] == [__file__]
    assert issubclass(caught[0].category, DeprecationWarning)


def test_the_stacklevel_outside_the_package_is_one_here():
    assert user_stacklevel() == 1
