"""Parameters flattened into one vector and back."""
import ember

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _same_device(param, device):
    if device is not None and param.device != device:
        raise TypeError("Found two parameters on different devices, this is currently not supported.")
    return param.device


def parameters_to_vector(parameters):
    """All parameters flattened and concatenated."""
    device, flat = None, []
    for p in parameters:
        device = _same_device(p, device)
        flat.append(p.reshape(-1))
    return ember.cat(flat)


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of ``vec`` into the parameters (replacing their data)."""
    if not isinstance(vec, ember.Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    device, start = None, 0
    for p in parameters:
        device = _same_device(p, device)
        n = p.numel()
        with ember.no_grad():
            p.copy_(vec[start:start + n].reshape(p.shape))
        start += n
