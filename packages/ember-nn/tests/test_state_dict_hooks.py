"""Module.load_state_dict's hooks against torch's: the public pre-hook gets the module first, post hooks see (and
may edit) the incompatible keys before the strict check, and must not return a value."""
import pytest
import torch

import ember


def test_load_state_dict_hooks_as_torch():
    seen = {}
    for lib in (torch, ember):
        calls = []
        m = lib.nn.Sequential(lib.nn.Linear(2, 2))
        m[0].register_load_state_dict_pre_hook(
            lambda mod, sd, prefix, *rest, calls=calls: calls.append(("pre", type(mod).__name__, prefix, sorted(sd))))

        def post(mod, keys, calls=calls):
            calls.append(("post", type(mod).__name__, list(keys.missing_keys), list(keys.unexpected_keys)))
            keys.unexpected_keys.clear()  # a post hook may forgive keys: strict loading then passes
        m.register_load_state_dict_post_hook(post)
        state = {k: v for k, v in m.state_dict().items()}
        state["extra"] = lib.zeros(1)
        result = m.load_state_dict(state)
        calls.append((list(result.missing_keys), list(result.unexpected_keys)))
        m.register_load_state_dict_post_hook(lambda mod, keys: 1)
        with pytest.raises(AssertionError, match="not expected to return new values"):
            m.load_state_dict(state)
        seen[lib.__name__] = calls
    assert seen["ember"] == seen["torch"]
