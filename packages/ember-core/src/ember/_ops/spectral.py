"""Short-time Fourier transform and its inverse (``stft``/``istft``) with PyTorch's arguments and defaults.

Framing is one gather: every (frame, offset) pair maps to a sample of the unpadded signal (the center
padding's reflect/replicate/circular modes are index maps; constant padding is a mask), so the whole
transform is gather, window, FFT; the inverse is inverse FFT, window, overlap-add (a scatter-add) and the
division by the summed squared window. VJPs chain the FFT ops' own VJPs with the adjoint gather/scatter."""
import types
import warnings

import numpy as np

from .. import _dtype as D
from .. import _factory
from .. import _promotion as P
from .._registry import REGISTRY, TORCH_NAME, op
from .activation import bound


def _call(name, x, n_fft, hop_length, win_length, window, normalized, onesided, return_complex, center=True,
          align=None):
    """PyTorch's description of the call, which its error messages quote."""
    w = "None" if window is None else f"torch.{TORCH_NAME[D.FROM_NP[window.dtype]]}Tensor{{{list(window.shape)}}}"
    return (f"{name}(torch.{TORCH_NAME[D.FROM_NP[x.dtype]]}Tensor{list(x.shape)}, n_fft={n_fft}, hop_length="
            f"{hop_length}, win_length={win_length}, window={w}, normalized={int(normalized)}, onesided={onesided}, "
            f"return_complex={int(bool(return_complex))}, align_to_window={align})")


def _defaults(n_fft, hop_length, win_length):
    return (n_fft // 4 if hop_length is None else hop_length), (n_fft if win_length is None else win_length)


def _check_window(where, n_fft, hop, win_length, window):
    if n_fft <= 0:
        raise RuntimeError(f"{where}: expected 0 < n_fft, but got n_fft={n_fft}")
    if hop <= 0:
        raise RuntimeError(f"{where}: expected hop_length > 0, but got hop_length={hop}")
    if not 0 < win_length <= n_fft:
        raise RuntimeError(f"{where}: expected 0 < win_length <= n_fft, but got win_length={win_length}")
    if window is not None and (window.ndim != 1 or window.shape[0] != win_length):
        raise RuntimeError(f"{where}: expected a 1D window tensor of size equal to win_length={win_length}, but got "
                           f"window with size {list(window.shape)}")


def _full_window(xp, window, win_length, n_fft, dtype):
    """The window zero-padded (centered) to ``n_fft`` points; ones when none is given."""
    w = xp.ones(win_length, dtype) if window is None else window.astype(dtype, copy=False)
    left = (n_fft - win_length) // 2
    return xp.concatenate([xp.zeros(left, dtype), w, xp.zeros(n_fft - win_length - left, dtype)])


def _frame_index(L, n_fft, hop, center, pad_mode, start=0, n_frames=None):
    """(positions, mask): the sample of the unpadded length-``L`` signal each (frame, offset) reads, and for
    constant padding which of them are inside it (None otherwise)."""
    pad = n_fft // 2 if center else 0
    if n_frames is None:
        n_frames = 1 + (L + 2 * pad - n_fft) // hop
    pos = np.arange(n_frames)[:, None] * hop + np.arange(n_fft)[None, :] - pad + start
    mask = None
    if pad_mode == "reflect":
        pos = np.abs(pos)
        pos = np.where(pos >= L, 2 * (L - 1) - pos, pos)
    elif pad_mode == "replicate":
        pos = np.clip(pos, 0, L - 1)
    elif pad_mode == "circular":
        pos = pos % L
    else:
        mask = (pos >= 0) & (pos < L)
        pos = np.clip(pos, 0, L - 1)
    return pos, mask


def _stft_plan(x, n_fft, hop_length, win_length, window, center, pad_mode, normalized, onesided, return_complex,
               align_to_window):
    """Checked arguments: (hop, win_length, positions, mask, onesided, result complex dtype)."""
    hop, win_length = _defaults(n_fft, hop_length, win_length)
    where = _call("stft", x, n_fft, hop, win_length, window, normalized, onesided, return_complex,
                  align=align_to_window)
    if center and pad_mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {pad_mode}")
    complex_in = x.dtype.kind == "c" or (window is not None and window.dtype.kind == "c")
    if return_complex is None and not complex_in:
        raise RuntimeError("stft requires the return_complex parameter be given for real inputs, and will further "
                           "require that return_complex=True in a future PyTorch release.")
    if align_to_window is not None and center:
        raise RuntimeError("stft align_to_window should only be set when center = false")
    if x.dtype.kind in "biu":
        raise RuntimeError(f"{where} : expected a tensor of floating point or complex values")
    if x.dtype.kind == "V" or x.dtype == np.float16:
        raise RuntimeError(f"MKL FFT doesn't support tensors of type: {TORCH_NAME[D.FROM_NP[x.dtype]]}")
    if x.ndim not in (1, 2):
        raise RuntimeError(f"{where} : expected a 1D or 2D tensor")
    L = x.shape[-1]
    pad = n_fft // 2 if center else 0
    if center and pad_mode == "reflect" and pad >= L:
        raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, but "
                           f"got: padding ({pad}, {pad}) at dimension {x.ndim} of input "
                           f"{[1] * (3 - x.ndim) + list(x.shape)}")
    if not 0 < n_fft <= L + 2 * pad:
        raise RuntimeError(f"{where} : expected 0 < n_fft < {L + 2 * pad}, but got n_fft={n_fft}")
    _check_window(where, n_fft, hop, win_length, window)
    if align_to_window:  # frames start where the window's nonzero part starts
        left = (n_fft - win_length) // 2
        pos, mask = _frame_index(L, n_fft, hop, False, "constant", -left, 1 + (L - win_length) // hop)
    else:
        pos, mask = _frame_index(L, n_fft, hop, center, pad_mode)
    if onesided is None:
        onesided = not complex_in
    elif onesided and complex_in:
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    rd = P.array_result_type(x, *([window] if window is not None else []))
    ct = D.storage(rd if rd.is_complex else D.complex64 if rd is D.float32 else D.complex128)
    return hop, win_length, pos, mask, onesided, ct


@op("stft")
def stft(xp, input, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",
         normalized=False, onesided=None, return_complex=None, align_to_window=None):
    """Short-time Fourier transform: FFTs of windowed frames ``hop_length`` apart; shape (batch?, frequencies,
    frames), as real/imaginary pairs in a last dim when ``return_complex=False`` (deprecated)."""
    hop, win_length, pos, mask, onesided, ct = _stft_plan(input, n_fft, hop_length, win_length, window, center,
                                                          pad_mode, normalized, onesided, return_complex,
                                                          align_to_window)
    if window is None:
        warnings.warn("A window was not provided. A rectangular window will be applied,which is known to cause "
                      "spectral leakage. Other windows such as torch.hann_window or torch.hamming_window are "
                      "recommended to reduce spectral leakage.To suppress this warning and use a rectangular "
                      "window, explicitly set `window=torch.ones(n_fft, device=<device>)`.", UserWarning, stacklevel=3)
    real_t = np.dtype(ct).char.lower()
    frames = input[..., xp.asarray(pos)]
    if mask is not None:
        frames = frames * xp.asarray(mask)
    frames = frames * _full_window(xp, window, win_length, n_fft, real_t if window is None or
                                   window.dtype.kind != "c" else ct)
    spec = xp.fft.rfft(frames.astype(real_t), axis=-1) if onesided else xp.fft.fft(frames.astype(ct), axis=-1)
    if normalized:
        spec = spec * (1 / np.sqrt(n_fft))
    spec = xp.swapaxes(spec, -1, -2).astype(ct, copy=False)
    if return_complex is False:
        warnings.warn("stft with return_complex=False is deprecated. In a future pytorch release, stft will return "
                      "complex tensors for all inputs, and return_complex=False will raise an error.\nNote: you can "
                      "still call torch.view_as_real on the complex output to recover the old return format.",
                      UserWarning, stacklevel=3)
        return xp.stack([spec.real, spec.imag], -1)
    return spec


def _vjp_of(name, args, kwargs, g):
    o = REGISTRY[name]
    return o.vjp_fn(types.SimpleNamespace(args=args, kwargs=kwargs, out=o.fn(*args, **kwargs)), g)[0]


def _kw(ctx, o, names):
    a = bound(ctx, o)
    return [a[n] for n in names]


def _as_t(arr, like):
    return _factory.tensor(arr, device=like.device)


def _real_part(g, like):
    return REGISTRY["real"].fn(g) if g.dtype.is_complex and not like.dtype.is_complex else g


@stft.vjp
def _(ctx, g):
    x, n_fft, hop_length, win_length, window, center, pad_mode, normalized, onesided, return_complex, align = _kw(
        ctx, stft, ("input", "n_fft", "hop_length", "win_length", "window", "center", "pad_mode", "normalized",
                    "onesided", "return_complex", "align_to_window"))
    hop, win_length, pos, mask, onesided, ct = _stft_plan(x._data, n_fft, hop_length, win_length,
                                                          None if window is None else window._data, center, pad_mode,
                                                          normalized, onesided, return_complex, align)
    if return_complex is False:
        g = REGISTRY["view_as_complex"].fn(g.contiguous())
    g = g.transpose(-1, -2) * (1 / np.sqrt(n_fft) if normalized else 1.0)
    idx = _as_t(pos.reshape(-1), x)
    raw = x.index_select(-1, idx).reshape(tuple(x.shape[:-1]) + pos.shape)
    if mask is not None:
        raw = raw * _as_t(mask, x)
    left = (n_fft - win_length) // 2
    w = x.new_ones(win_length, dtype=D.FROM_NP[np.dtype(np.dtype(ct).char.lower())]) if window is None else window
    wfull = REGISTRY["constant_pad_nd"].fn(w, [left, n_fft - win_length - left])
    frames = raw * wfull
    if onesided:
        gf = _vjp_of("fft_rfft", (frames,), {"dim": -1}, g)
    else:
        gf = _vjp_of("fft_fft", (frames if frames.dtype.is_complex else frames.to(D.FROM_NP[np.dtype(ct)]),),
                     {"dim": -1}, g)
    gx = gf * (wfull.conj() if wfull.dtype.is_complex else wfull)
    if mask is not None:
        gx = gx * _as_t(mask, x)
    gx = _real_part(gx, x)
    gx = x.new_zeros(x.shape, dtype=gx.dtype).index_add(-1, idx, gx.reshape(tuple(x.shape[:-1]) + (-1,)))
    gw = None
    if window is not None:
        gwf = gf * (raw.conj() if raw.dtype.is_complex else raw)
        gwf = _real_part(gwf.reshape((-1, n_fft)).sum(0), window)
        gw = gwf.narrow(0, left, win_length)
    return _grads_stft(ctx, gx.to(x.dtype), gw)


def _grads_stft(ctx, gx, gw):
    """One gradient per positional argument: the input's, and the window's when passed positionally."""
    out = [gx] + [None] * (len(ctx.args) - 1)
    if len(ctx.args) > 4:
        out[4] = gw
    return tuple(out)


# ---- inverse ----------------------------------------------------------------------------------
def _istft_plan(x, n_fft, hop_length, win_length, window, center, normalized, onesided, length, return_complex):
    hop, win_length = _defaults(n_fft, hop_length, win_length)
    where = _call("istft", x, n_fft, hop, win_length, window, normalized, onesided, return_complex)
    if x.dtype.kind != "c":
        raise RuntimeError("istft requires a complex-valued input tensor matching the output from stft with "
                           "return_complex=True.")
    if x.ndim not in (2, 3):
        raise RuntimeError(f"{where}: expected a tensor with a 2 or 3 dimensions of complex, but got {x.ndim}")
    F, T = x.shape[-2:]
    _check_window(where, n_fft, hop, win_length, window)
    if onesided is None:
        onesided = F != n_fft
    if onesided and F != n_fft // 2 + 1:
        raise RuntimeError(f"{where}: expected the frequency dimension (3rd to the last) of the input tensor to match "
                           f"n_fft / 2 + 1 when onesided=True, but got {F}")
    if not onesided and F != n_fft:
        raise RuntimeError(f"{where}: expected the frequency dimension (3rd to the last) of the input tensor to match "
                           f"n_fft when onesided=False, but got {F}")
    if return_complex and onesided:
        raise RuntimeError("cannot have onesided output if window or input is complex")
    if T == 0:
        raise RuntimeError(f"{where}: input tensor cannot be empty.")
    full = n_fft + hop * (T - 1)
    start = n_fft // 2 if center else 0
    end = start + length if length is not None else (full - n_fft // 2 if center else full)
    pos = np.arange(T)[:, None] * hop + np.arange(n_fft)[None, :]
    return hop, win_length, onesided, full, start, min(end, full), pos


@op("istft")
def istft(xp, input, n_fft, hop_length=None, win_length=None, window=None, center=True, normalized=False,
          onesided=None, length=None, return_complex=False):
    """Inverse of ``stft``: inverse FFTs of the frames, windowed, overlap-added and divided by the summed
    squared window; ``length`` trims or zero-pads the signal."""
    hop, win_length, onesided, full, start, end, pos = _istft_plan(input, n_fft, hop_length, win_length, window,
                                                                   center, normalized, onesided, length,
                                                                   return_complex)
    ct = input.dtype
    rt = np.dtype(ct.char.lower())
    spec = xp.swapaxes(input, -1, -2)
    if normalized:
        spec = spec * np.sqrt(n_fft)
    frames = xp.fft.irfft(spec, n=n_fft, axis=-1) if onesided else xp.fft.ifft(spec, n=n_fft, axis=-1)
    if not return_complex and not onesided:
        frames = frames.real
    w = _full_window(xp, window, win_length, n_fft, rt if window is None or window.dtype.kind != "c" else ct)
    frames = (frames * w).astype(ct if return_complex else rt, copy=False)
    lead = input.shape[:-2]
    y = xp.zeros(lead + (full,), frames.dtype)
    flat = y.reshape(-1, full)
    _add_at(xp, flat, pos.reshape(-1), frames.reshape(-1, pos.size))
    env = xp.zeros(full, rt)
    _add_at(xp, env[None], pos.reshape(-1), xp.broadcast_to(xp.abs(w) ** 2, pos.shape).reshape(1, -1))
    env = env[start:end]
    if env.size and float(xp.abs(env).min()) < 1e-11:
        where = _call("istft", input, n_fft, hop, win_length, window, normalized, onesided, return_complex)
        raise RuntimeError(f"{where}"
                           f": window overlap add min: {float(xp.abs(env).min())}")
    y = y[..., start:end] / env
    if length is not None and y.shape[-1] < length:
        y = xp.concatenate([y, xp.zeros(lead + (length - y.shape[-1],), y.dtype)], -1)
    return y


def _add_at(xp, target, cols, values):
    """``target[:, cols] += values`` with repeated columns accumulating (a scatter-add)."""
    if xp is np:
        np.add.at(target, (slice(None), cols), values)
    else:
        import cupyx
        cupyx.scatter_add(target, (slice(None), xp.asarray(cols)), values)


@istft.vjp
def _(ctx, g):
    x, n_fft, hop_length, win_length, window, center, normalized, onesided, length, return_complex = _kw(
        ctx, istft, ("input", "n_fft", "hop_length", "win_length", "window", "center", "normalized", "onesided",
                     "length", "return_complex"))
    hop, win_length, onesided, full, start, end, pos = _istft_plan(
        x._data, n_fft, hop_length, win_length, None if window is None else window._data, center, normalized,
        onesided, length, return_complex)
    left = (n_fft - win_length) // 2
    rdt = x.dtype.to_real()
    w = x.new_ones(win_length, dtype=rdt) if window is None else window
    wfull = REGISTRY["constant_pad_nd"].fn(w, [left, n_fft - win_length - left])
    idx = _as_t(pos.reshape(-1), x)
    lead = tuple(x.shape[:-2])
    env_full = (wfull.abs() ** 2).expand(pos.shape).reshape(-1)
    env_full = x.new_zeros(full, dtype=rdt).index_add(0, idx, env_full)
    env = env_full.narrow(0, start, end - start)
    g = g.narrow(-1, 0, end - start)  # the zero padding past the signal has no input
    gN = REGISTRY["constant_pad_nd"].fn(g / env, [start, full - end])   # d y / d (overlap-added frames)
    g_frames = gN.index_select(-1, idx).reshape(lead + pos.shape)
    spec = x.transpose(-1, -2) * (np.sqrt(n_fft) if normalized else 1.0)
    if onesided:
        frames = REGISTRY["fft_irfft"].fn(spec, n_fft, -1)
        gs = _vjp_of("fft_irfft", (spec, n_fft, -1), {}, g_frames * wfull)
    else:
        frames = REGISTRY["fft_ifft"].fn(spec, n_fft, -1)
        gf = g_frames * (wfull.conj() if wfull.dtype.is_complex else wfull)
        gs = _vjp_of("fft_ifft", (spec, n_fft, -1), {}, gf if return_complex else gf.to(x.dtype))
        if not return_complex:
            frames = REGISTRY["real"].fn(frames)
    gx = (gs * (np.sqrt(n_fft) if normalized else 1.0)).transpose(-1, -2)
    gw = None
    if window is not None:
        y = ctx.out.narrow(-1, 0, end - start)
        gy = g * (y.conj() if y.dtype.is_complex else y)
        genv = REGISTRY["constant_pad_nd"].fn(-gy.reshape((-1, end - start)).sum(0) / env, [start, full - end])
        gw_frames = (g_frames * (frames.conj() if frames.dtype.is_complex else frames)).reshape((-1, n_fft)).sum(0)
        gw_env = genv.index_select(0, idx).reshape(pos.shape).sum(0) * 2 * wfull
        gw = _real_part(gw_frames + gw_env, wfull)
        gw = gw.narrow(0, left, win_length)
    out = [gx] + [None] * (len(ctx.args) - 1)
    if len(ctx.args) > 4:
        out[4] = gw
    return tuple(out)

