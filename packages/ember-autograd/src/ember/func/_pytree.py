"""Pytrees of the transforms' arguments and results: nested tuples (named ones too), lists and dicts; anything else
is a leaf."""


def leaves(tree):
    """The leaves of ``tree``, depth first."""
    if isinstance(tree, (tuple, list)):
        return [leaf for item in tree for leaf in leaves(item)]
    if isinstance(tree, dict):
        return [leaf for item in tree.values() for leaf in leaves(item)]
    return [tree]


def unflatten(tree, new_leaves):
    """``tree``'s structure holding ``new_leaves`` (in ``leaves(tree)``'s order) in place of its own."""
    it = iter(new_leaves)

    def build(t):
        if isinstance(t, (tuple, list)):
            items = [build(v) for v in t]
            return type(t)(*items) if hasattr(t, "_fields") else type(t)(items)
        if isinstance(t, dict):
            return {k: build(v) for k, v in t.items()}
        return next(it)
    return build(tree)


def tree_map(fn, tree):
    return unflatten(tree, [fn(leaf) for leaf in leaves(tree)])
