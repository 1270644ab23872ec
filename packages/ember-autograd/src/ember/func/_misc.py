"""The small members of ``torch.func``: ``functionalize``, ``debug_unwrap`` and ``rearrange`` (einops-style)."""
import functools
import math
import re

__all__ = ["debug_unwrap", "functionalize", "rearrange"]


def functionalize(func, *, remove="mutations"):
    """``func`` with its in-place ops replaced by out-of-place ones. ember runs eagerly and has no traced programs
    to rewrite, so the function computes the same values, inputs mutated as by ``func``: it is returned as is."""
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(f"functionalize(f, remove='mutations'): received invalid argument for remove={remove}. "
                           "Valid options are:\n     remove='mutations': all inplace and out= operators will be "
                           "removed from the program, and replaced with their out-of-place equivalents.\n     "
                           "remove='mutations_and_views': In addition to the above, all aliasing operators {view} "
                           "will be replaced with their non-aliasing counterparts, {view}_copy.\n")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)
    return wrapper


def debug_unwrap(tensor, *, recurse=True):
    """The tensor a vmap batched tensor stands for: its batch dims as ordinary leading dims (only the innermost
    level's with ``recurse=False``). Other tensors are returned unchanged."""
    from ._vmap import BatchedTensor, as_batched, physical
    if not isinstance(tensor, BatchedTensor):
        return tensor
    with physical():
        alias = tensor.view_as(tensor)
    return as_batched(alias, () if recurse else tensor._levels[:-1])


_TOKEN = re.compile(r"\(|\)|\.\.\.|[A-Za-z_][A-Za-z0-9_]*|\d+|\S")


def _parse(side):
    """A side of a rearrange pattern: a list of groups, each a list of axis names ("…" for the ellipsis, "1" for
    a size-one axis); a bare name is a group of one."""
    groups, current = [], None
    for tok in _TOKEN.findall(side):
        if tok == "(":
            if current is not None:
                raise ValueError("Axis composition is one-level (brackets inside brackets not allowed)")
            current = []
        elif tok == ")":
            if current is None:
                raise ValueError("Brackets are not balanced")
            groups.append(current)
            current = None
        else:
            if not (tok == "..." or tok.isidentifier() or tok.isdigit()):
                raise ValueError(f"Invalid axis identifier: {tok}")
            name = "…" if tok == "..." else tok
            (current if current is not None else groups).append(name if current is not None else [name])
    if current is not None:
        raise ValueError("Brackets are not balanced")
    return groups


def rearrange(tensor, pattern, **axes_lengths):
    """einops' ``rearrange``: reorder, merge and split dims by a pattern such as ``"b c (h w) -> b h w c"``."""
    if "->" not in pattern:
        raise ValueError("Pattern must contain '->'")
    left, right = (_parse(side) for side in pattern.split("->"))
    names = {n for g in left for n in g if n != "1"}
    out_names = {n for g in right for n in g if n != "1"}
    if names != out_names:
        raise ValueError(f"Identifiers only on one side of rearrange expression (should be on both): "
                         f"{names ^ out_names}")
    shape = tuple(tensor.shape)
    if any(g == ["…"] for g in left):
        fixed = len(left) - 1
        if len(shape) < fixed:
            raise ValueError(f"Number of dimensions in pattern ({fixed}) must be at most the number of dimensions "
                             f"in the tensor ({len(shape)})")
        ellipsis = [f"…{i}" for i in range(len(shape) - fixed)]

        def expand(groups):
            out = []
            for g in groups:
                if g == ["…"]:
                    out += [[e] for e in ellipsis]
                elif "…" in g:
                    i = g.index("…")
                    out.append(g[:i] + ellipsis + g[i + 1:])
                else:
                    out.append(g)
            return out
        left, right = expand(left), expand(right)
    elif len(left) != len(shape):
        raise ValueError(f"Number of dimensions in pattern ({len(left)}) must be equal to the number of dimensions in "
                         f"the tensor ({len(shape)})")
    sizes = dict(axes_lengths)
    for group, n in zip(left, shape):
        unknown = [a for a in group if a not in sizes and a != "1"]
        known = math.prod(sizes[a] for a in group if a in sizes)
        if len(unknown) > 1:
            raise ValueError(f"Could not infer sizes for {set(unknown)}")
        if unknown:
            if known == 0 or n % known:
                raise ValueError(f"Shape mismatch, can't divide axis of length {n} in chunks of {known}")
            sizes[unknown[0]] = n // known
        elif known != n:
            raise ValueError(f"Shape mismatch, {n} != {known}")
    elementary = [a for g in left for a in g if a != "1"]
    x = tensor.reshape(*[sizes[a] for a in elementary]) if elementary else tensor.reshape(())
    order = [a for g in right for a in g if a != "1"]
    x = x.permute(*[elementary.index(a) for a in order]) if order else x
    return x.reshape(*[math.prod(sizes.get(a, 1) for a in g if a != "1") for g in right])

