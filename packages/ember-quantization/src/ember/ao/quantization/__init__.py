"""ember.ao.quantization: observers, fake quantization, qconfigs, fusion and eager-mode quantization (prepare /
convert, quantize_dynamic), as PyTorch's ``torch.ao.quantization``."""
from .fake_quantize import *  # noqa: F401,F403
from .fuse_modules import fuse_modules, fuse_modules_qat  # noqa: F401
from .fuser_method_mappings import *  # noqa: F401,F403
from .observer import *  # noqa: F401,F403
from .observer import ObserverBase
from .qconfig import *  # noqa: F401,F403
from .qconfig_mapping import *  # noqa: F401,F403
from .quant_type import *  # noqa: F401,F403
from .quantization_mappings import *  # noqa: F401,F403
from .quantize import *  # noqa: F401,F403
from .quantize_jit import *  # noqa: F401,F403
from .stubs import *  # noqa: F401,F403
from .utils import MatchAllNode, Pattern, get_combined_dict, is_per_channel  # noqa: F401

ObserverOrFakeQuantize = ObserverBase | FakeQuantizeBase  # noqa: F405


def default_eval_fn(model, calib_data):
    """Calibration loop of ``quantize``: runs ``model`` on the inputs of ``(input, target)`` pairs."""
    for data, _target in calib_data:
        model(data)


class _DerivedObserverOrFakeQuantize(ObserverBase):
    """An observer whose qparams are derived from other observers' (``derive_qparams_fn(obs_or_fqs)``)."""

    def __init__(self, dtype, obs_or_fqs, derive_qparams_fn, quant_min=None, quant_max=None, qscheme=None,
                 ch_axis=None):
        super().__init__(dtype)
        self.obs_or_fqs, self.derive_qparams_fn = obs_or_fqs, derive_qparams_fn
        self.quant_min, self.quant_max, self.qscheme, self.ch_axis = quant_min, quant_max, qscheme, ch_axis
        if is_per_channel(qscheme) and ch_axis is None:
            raise AssertionError("Must provide a valid ch_axis if qscheme is per channel")

    def forward(self, x):
        return x

    def calculate_qparams(self):
        return self.derive_qparams_fn(self.obs_or_fqs)
