"""``ember.testing``: ``assert_close`` and ``make_tensor``, as in ``torch.testing``.

Not provided: ``FileCheck`` (it checks TorchScript IR, which ember does not have).
"""
from ._comparison import assert_allclose, assert_close
from ._creation import make_tensor

__all__ = ["assert_close", "assert_allclose", "make_tensor"]
