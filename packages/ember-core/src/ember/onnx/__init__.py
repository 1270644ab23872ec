"""``ember.onnx``: importable, so that programs which import it run; ember cannot export ONNX.

Exporting needs a traced graph, which an eager framework without a tracer does not have. ``export`` raises
``NotImplementedError`` saying so; ``is_in_onnx_export()`` is always False (code that branches on it takes
its eager path). To get an ONNX file, load the weights saved by ``ember.save`` into the same model written
for PyTorch (the checkpoint format is PyTorch's) and export it there.
"""

__all__ = ["export", "dynamo_export", "is_in_onnx_export", "OnnxExporterError"]

_WHY = ("ONNX export is not supported by ember (it runs eagerly and records no graph to export); save the "
        "state_dict with ember.save, load it into the same model under PyTorch and export it with torch.onnx")


class OnnxExporterError(RuntimeError):
    """PyTorch's error type for failed exports; ember raises NotImplementedError instead (export is absent)."""


def export(model, args=(), f=None, *, kwargs=None, **options):
    raise NotImplementedError(f"ember.onnx.export: {_WHY}")


def dynamo_export(model, /, *model_args, export_options=None, **model_kwargs):
    raise NotImplementedError(f"ember.onnx.dynamo_export: {_WHY}")


def is_in_onnx_export():
    """False: ember never exports, so no code runs inside an ONNX export."""
    return False
