"""DeviceMesh: the ranks laid out on an n-dimensional grid with one process group per grid dimension, as
torch.distributed.device_mesh. A collective along a dimension runs on ``mesh.get_group(dim)``.

Every mesh derives from a root mesh (the one built from an array of ranks): it shares the root's flat rank map
and shape, and each of its dimensions is a tuple of root axes in increasing order (one axis for a plain
dimension, several for a flattened one). Slicing and flattening are index arithmetic on those axes; only the
root's dimensions and flattened dimensions create process groups (all ranks take part, as in new_group)."""
import math
import os
import warnings

import numpy as np

import ember

from . import distributed_c10d as c10d

__all__ = ["init_device_mesh", "DeviceMesh"]


class _MeshEnv:
    """The meshes entered with ``with mesh:`` (innermost last)."""

    def __init__(self):
        self.mesh_stack = []

    def get_current_mesh(self):
        if not self.mesh_stack:
            raise RuntimeError("No device mesh is currently active!")
        return self.mesh_stack[-1]


_mesh_resources = _MeshEnv()


def _row_major_strides(shape):
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _modes(shape, axes):
    """The (size, stride) pairs of the dimension made of root ``axes``, over the flat rank map: size-1 axes left
    out, contiguous neighbours merged (PyTorch's layout of that dimension, which its repr and equality use)."""
    strides = _row_major_strides(shape)
    modes = []
    for a in axes:
        size, stride = shape[a], strides[a]
        if size == 1:
            continue
        if modes and modes[-1][1] == size * stride:
            modes[-1] = (modes[-1][0] * size, stride)
        else:
            modes.append((size, stride))
    return tuple(modes)


def _as_rank_array(mesh):
    if isinstance(mesh, ember.Tensor):
        mesh = mesh.detach().cpu().numpy()
    return np.array(mesh, dtype=np.int64)


def _groups_by_name():
    return {name: pg for pg, name in c10d._world.pg_names.items()}


class DeviceMesh:
    """``DeviceMesh(device_type, mesh, mesh_dim_names=None)``: ``mesh`` (an array of global ranks, nested lists or
    a tensor) is the grid; every rank of the default group calls it alike (it initialises the default group if
    needed, and creates a process group per mesh dimension through new_group). ``mesh["dp"]`` and
    ``mesh["dp", "tp"]`` are sub-meshes (by dimension name, in order) reusing those groups."""

    def __init__(self, device_type, mesh=None, *, mesh_dim_names=None, backend_override=None, _init_backend=True,
                 _rank=None):
        if mesh is None:
            raise TypeError("DeviceMesh needs a mesh: an array of the global ranks of its devices")
        ranks = _as_rank_array(mesh)
        self._setup(device_type, ranks.reshape(-1), ranks.shape, tuple((a,) for a in range(ranks.ndim)),
                    mesh_dim_names, None)
        if backend_override is None:
            backend_override = ((None, None),) * self.ndim
        elif len(backend_override) != self.ndim:
            raise ValueError(f"backend_override should have the same length as the number of mesh dimensions, but "
                             f"got {len(backend_override)} and {self.ndim}.")
        if device_type != "xla":
            if _init_backend:
                self._setup_world_group_and_device()
                self._dim_groups = self._init_process_groups(self._dims, mesh_dim_names, backend_override)
            self._locate(_rank)

    # ------------------------------------------------------------------------------------------------ construction
    def _setup(self, device_type, rank_map, root_shape, dims, mesh_dim_names, root):
        self._device_type = device_type
        self._rank_map = rank_map
        self._root_shape = tuple(int(n) for n in root_shape)
        self._dims = dims
        self._mesh_dim_names = tuple(mesh_dim_names) if mesh_dim_names else None
        self._root_mesh = root
        self._flatten_mapping = {}  # (on a root mesh) name -> the flattened mesh made by _flatten

    @classmethod
    def _derived(cls, root, dims, mesh_dim_names, groups):
        """A mesh over ``root``'s ranks with dimensions ``dims`` (tuples of root axes), using ``groups``."""
        mesh = cls.__new__(cls)
        mesh._setup(root._device_type, root._rank_map, root._root_shape, dims, mesh_dim_names, root)
        if groups is not None:
            mesh._dim_groups = groups
        mesh._locate(None)
        return mesh

    def _locate(self, rank):
        self._rank = c10d.get_rank() if rank is None else rank
        found = np.argwhere(self.mesh.numpy() == self._rank)
        if len(found) > 1:
            raise AssertionError(f"rank {self._rank} appears {len(found)} times in the mesh")
        self._coordinate_on_dim = tuple(int(i) for i in found[0]) if len(found) else None

    def _setup_world_group_and_device(self):
        if not c10d.is_initialized():
            c10d.init_process_group()
        world_size = c10d.get_world_size()
        if self._rank_map.size > world_size:
            raise RuntimeError(f"Mesh should not be bigger than default world size {world_size}, but found "
                               f"{self._rank_map.size} ranks!")
        # a GPU mesh picks this process's GPU unless the program did: LOCAL_RANK (set by launchers), else the rank
        if self._device_type == "cuda" and ember.cuda.is_available() and not ember.cuda.is_initialized():
            count = ember.cuda.device_count()
            if "LOCAL_RANK" in os.environ:
                ember.cuda.set_device(int(os.environ["LOCAL_RANK"]))
            else:
                warnings.warn("No GPU was selected for this process before the DeviceMesh was made and LOCAL_RANK "
                              "is not set: using GPU global_rank % GPUs per host (assumes every host has as many "
                              "GPUs). Set the device first (or launch with torchrun).", stacklevel=3)
                if world_size > count and world_size % count != 0:
                    raise RuntimeError(f"DeviceMesh only support homogeneous hardware, but found {world_size} ranks "
                                       f"and {count} {self._device_type} devices!")
                ember.cuda.set_device(c10d.get_rank() % count)

    def _lines(self, axes):
        """The ranks of every line of the root grid along the root ``axes`` taken together (one row per line)."""
        grid = self._rank_map.reshape(self._root_shape)
        others = [a for a in range(grid.ndim) if a not in axes]
        return grid.transpose(others + list(axes)).reshape(-1, math.prod(self._root_shape[a] for a in axes))

    def _init_process_groups(self, dims, names, backend_override):
        """For each dimension, one group per line of ranks along it; this rank's (or nothing outside the mesh)."""
        mine = []
        for d, axes in enumerate(dims):
            group = self._init_one_process_group(axes, names[d] if names else f"dim_{d}", backend_override[d])
            if group is not None:
                mine.append(group)
        if mine and len(mine) != len(dims):
            raise AssertionError("this rank is in the groups of some mesh dimensions and not others")
        return mine

    def _init_one_process_group(self, axes, dim_name, override):
        backend, options = override
        timeout = getattr(options, "_timeout", None)
        lines = self._lines(axes)
        default = c10d._get_default_group()
        world_size = c10d.get_world_size()
        if lines.shape[1] == world_size and override == (None, None):
            # the whole world along this dimension: the default group serves it (a GPU mesh over a gloo default
            # group gets a group of the default backends, as PyTorch makes)
            if ember.cuda.is_available() and c10d.get_backend(default) == "gloo":
                return c10d.new_group(ranks=list(range(world_size)), backend=backend, group_desc="mesh_default")
            return default
        rank, mine = c10d.get_rank(), None
        for line in lines.tolist():
            group = c10d.new_group(ranks=line, timeout=timeout, backend=backend, pg_options=options,
                                   group_desc=f"mesh_{dim_name}")
            if rank in line:
                if mine is not None:
                    raise RuntimeError(f"Each device mesh dimension should get only one process group, but got "
                                       f"{rank} in {line}!")
                mine = group
        return mine

    # ---------------------------------------------------------------------------------------------------- queries
    @property
    def device_type(self):
        return self._device_type

    @property
    def mesh_dim_names(self):
        return self._mesh_dim_names

    def _full_mesh(self):
        """Every copy of this mesh across the root (the root axes it does not span), stacked on a first axis."""
        grid = self._rank_map.reshape(self._root_shape)
        covered = [a for axes in self._dims for a in axes]
        others = [a for a in range(grid.ndim) if a not in covered]
        return grid.transpose(others + covered).reshape((-1, *self.shape))

    @property
    def mesh(self):
        """The ranks of this mesh as an int32 tensor (for a sub-mesh: the copy holding this rank)."""
        full = self._full_mesh()
        if full.shape[0] == 1:
            return ember.tensor(full[0], dtype=ember.int32)
        holder = np.argwhere(full == c10d.get_rank())
        if len(holder) == 0:
            raise RuntimeError("In order to get the mesh Tensor of a DeviceMesh it needs to either have all its "
                               "original dimensions (e.g., no slicing) or it needs to contain the local rank")
        return ember.tensor(full[holder[0][0]], dtype=ember.int32)

    def size(self, mesh_dim=None):
        if mesh_dim is None:
            return math.prod(self.shape)
        return self.shape[mesh_dim]

    @property
    def ndim(self):
        return len(self._dims)

    @property
    def shape(self):
        return tuple(math.prod(self._root_shape[a] for a in axes) for axes in self._dims)

    def get_rank(self):
        """This process's global rank."""
        return c10d.get_rank()

    def get_coordinate(self):
        """This rank's index along each mesh dimension (None if it is not in the mesh)."""
        return self._coordinate_on_dim

    def _is_current_rank_part_of_mesh(self):
        return self._coordinate_on_dim is not None

    def _get_root_mesh(self):
        return self._root_mesh or self

    def _get_mesh_dim_by_name(self, mesh_dim_name):
        if not self._mesh_dim_names:
            raise KeyError("No `mesh_dim_names` found.")
        if mesh_dim_name not in self._mesh_dim_names:
            raise KeyError(f"Mesh dimension '{mesh_dim_name}' does not exist.",
                           f"Available mesh dimensions are: mesh_dim_names={self._mesh_dim_names}")
        return self._mesh_dim_names.index(mesh_dim_name)

    def get_group(self, mesh_dim=None):
        """The process group of this rank along ``mesh_dim`` (an index or a name; may be left out on a 1-D mesh)."""
        if not hasattr(self, "_dim_groups"):
            raise RuntimeError("DeviceMesh process groups not initialized!")
        if self.ndim > 1 and mesh_dim is None:
            raise RuntimeError(f"Found the DeviceMesh have {self.ndim} dimensions",
                               "Optional kwarg `mesh_dim` needs to be specified when device_mesh.ndim > 1.",
                               "If you want to get the list of all the ProcessGroups in the DeviceMesh,"
                               "please use `get_all_groups()` instead.")
        if mesh_dim is None:
            return self._dim_groups[0]
        flattened = self._get_root_mesh()._flatten_mapping
        if isinstance(mesh_dim, str) and mesh_dim in flattened:
            return flattened[mesh_dim]._dim_groups[0]
        if isinstance(mesh_dim, str):
            mesh_dim = self._get_mesh_dim_by_name(mesh_dim)
        return self._dim_groups[mesh_dim]

    def get_all_groups(self):
        return [self.get_group(d) for d in range(self.ndim)]

    def get_local_rank(self, mesh_dim=None):
        """This rank's rank in its group along ``mesh_dim`` (may be left out on a 1-D mesh)."""
        if self.ndim > 1 and mesh_dim is None:
            raise RuntimeError(f"Found the DeviceMesh have {self.ndim} dimensions",
                               "Optional kwarg `mesh_dim` needs to be specified when device_mesh.ndim > 1.")
        return c10d.get_rank(self.get_group(0 if mesh_dim is None else mesh_dim))

    # ------------------------------------------------------------------------------------ slicing and flattening
    def __getitem__(self, mesh_dim_names):
        if not self._mesh_dim_names:
            raise RuntimeError("Cannot slice a DeviceMesh without mesh_dim_names!")
        names = (mesh_dim_names,) if isinstance(mesh_dim_names, str) else tuple(mesh_dim_names)
        if names == self._mesh_dim_names:
            return self
        # the root also slices the dimensions flattened from it (deprecated in PyTorch)
        flattened = self._flatten_mapping if self._root_mesh is None else {}
        valid = [*self._mesh_dim_names, *flattened]
        if not all(name in valid for name in names):
            raise KeyError(f"Invalid mesh_dim_names {names} specified. Valid mesh_dim_names are {valid}.")
        dims, groups = [], []
        for name in names:
            if name in self._mesh_dim_names:
                d = self._mesh_dim_names.index(name)
                dims.append(self._dims[d])
                groups.append(self._dim_groups[d] if getattr(self, "_dim_groups", None) else None)
            else:
                warnings.warn(f"Slicing the flattened dimension {name!r} out of the root mesh is deprecated: keep "
                              f"the mesh _flatten returned instead.", stacklevel=2)
                dims.append(flattened[name]._dims[0])
                groups.append(flattened[name]._dim_groups[0] if flattened[name]._dim_groups else None)
        axes = [a for d in dims for a in d]
        if any(a > b for a, b in zip(axes, axes[1:])):
            raise KeyError(f"Invalid mesh_dim_names {names} specified. Mesh dim indices should be in ascending "
                           f"order.")
        if len(set(axes)) != len(axes):
            raise RuntimeError(f"Slicing overlapping dim_names {names} is not allowed.")
        held = None if not hasattr(self, "_dim_groups") else [g for g in groups if g is not None]
        return DeviceMesh._derived(self._get_root_mesh(), tuple(dims), names, held)

    def _flatten(self, mesh_dim_name=None, backend_override=None):
        """This mesh as one dimension named ``mesh_dim_name`` (default: the names joined by "_"), with a group per
        line of ranks (made by every rank, as new_group); later ``root[name]`` and ``get_group(name)`` find it."""
        if not self._mesh_dim_names:
            raise RuntimeError("Cannot flatten a DeviceMesh without mesh_dim_names!")
        if not mesh_dim_name:
            mesh_dim_name = "_".join(self._mesh_dim_names)
        if self.ndim == 1 and mesh_dim_name in self._mesh_dim_names:
            return self
        root = self._get_root_mesh()
        if mesh_dim_name in (root._mesh_dim_names or ()):
            raise ValueError(f"{mesh_dim_name} already exists for submesh of the {root}. ",
                             f"The mesh_dim_names of submesh and flattened mesh are {root._mesh_dim_names}. "
                             f"Please specify another valid mesh_dim_name.")
        axes = tuple(a for d in self._dims for a in d)
        known = root._flatten_mapping.get(mesh_dim_name)
        if known is not None:
            if _modes(self._root_shape, known._dims[0]) != _modes(self._root_shape, axes):
                raise ValueError(f"Flatten mesh with mesh_dim_name {mesh_dim_name} has been created before, Please "
                                 f"specify another valid mesh_dim_name.")
            return known
        override = (None, None)
        if backend_override is not None:
            override = _normalize_backend_override({0: backend_override}, 1)[0]
        flat = DeviceMesh._derived(root, (axes,), (mesh_dim_name,), None)
        flat._dim_groups = flat._init_process_groups(flat._dims, flat._mesh_dim_names, (override,))
        root._flatten_mapping[mesh_dim_name] = flat
        return flat

    @staticmethod
    def from_group(group, device_type, mesh=None, *, mesh_dim_names=None):
        """A mesh over existing process groups: one group (a 1-D mesh of its ranks; ``mesh`` if given must list
        them), or a list of groups, one per dimension of ``mesh`` (then ``mesh`` and ``mesh_dim_names`` are
        required). No group is created."""
        if isinstance(group, c10d.ProcessGroup):
            ranks = c10d.get_process_group_ranks(group)
            if mesh is not None and _as_rank_array(mesh).tolist() != ranks:
                shown = mesh if not isinstance(mesh, ember.Tensor) else str(mesh)
                raise ValueError(f"Invalid mesh {shown} for ProcessGroup with ranks {ranks}")
            made = DeviceMesh(device_type, ranks, mesh_dim_names=mesh_dim_names, _init_backend=False)
            made._dim_groups = [group]
            return made
        groups = list(group)
        if not groups:
            raise ValueError("Expects at least one ProcessGroup to be passed")
        if mesh is None:
            raise ValueError("Must pass mesh if passing multiple ProcessGroups")
        if mesh_dim_names is None:
            raise ValueError("Must pass mesh_dim_names if passing multiple ProcessGroups")
        ranks = _as_rank_array(mesh)
        if ranks.ndim != len(groups):
            raise ValueError(f"Expects mesh with ndim equal to number of ProcessGroups but got mesh {ranks.tolist()} "
                             f"and {len(groups)} ProcessGroups")
        made = DeviceMesh(device_type, ranks, mesh_dim_names=mesh_dim_names, _init_backend=False)
        made._dim_groups = groups
        return made

    # ------------------------------------------------------------------------------------------- python protocol
    def __enter__(self):
        _mesh_resources.mesh_stack.append(self)
        return self

    def __exit__(self, *exc):
        _mesh_resources.mesh_stack.pop()

    def __repr__(self):
        sizes = self.shape
        shown = (f"({', '.join(f'{k}={v}' for k, v in zip(self._mesh_dim_names, sizes))})" if self._mesh_dim_names
                 else f"{sizes}")
        strides = []
        for axes in self._dims:
            modes = _modes(self._root_shape, axes)
            strides.append(modes[0][1] if len(modes) == 1 else tuple(s for _, s in modes))
        text = f"DeviceMesh({shown}, '{self._device_type}', stride={tuple(strides)}"
        if os.environ.get("TORCH_DISTRIBUTED_DEBUG", "") == "DETAIL":
            text += f", Mesh: {self.mesh.tolist()}"
        return text + ")"

    def _key(self):
        layout = tuple(_modes(self._root_shape, axes) + ((math.prod(self._root_shape[a] for a in axes),),)
                       for axes in self._dims)
        return tuple(self._rank_map.tolist()), layout, self._device_type, self._mesh_dim_names

    def __hash__(self):
        return hash(self._key())

    def __eq__(self, other):
        if self is other:
            return True
        return isinstance(other, DeviceMesh) and self._key() == other._key()

    def __getstate__(self):
        # process groups do not pickle: their names do, and find the groups again in a process that has them
        state = self.__dict__.copy()
        state.pop("_dim_groups", None)
        if hasattr(self, "_dim_groups"):
            state["_dim_group_names"] = [g.group_name for g in self._dim_groups]
        return state

    def __setstate__(self, state):
        names = state.pop("_dim_group_names", None)
        self.__dict__.update(state)
        if names is not None:
            known = _groups_by_name()
            if all(n in known for n in names):
                self._dim_groups = [known[n] for n in names]


def _normalize_backend_override(backend_override, ndim, mesh_dim_names=None):
    """``{dim index or name: backend name | options | (name, options)}`` -> a (name, options) pair per dimension."""
    left = dict(backend_override)
    names = tuple(mesh_dim_names or ())
    pairs = []
    for d in range(ndim):
        name = names[d] if d < len(names) else None
        if name is not None and name in left:
            if d in left:
                raise RuntimeError(f"Found redundant dim index {d} and name {name} in backend_override")
            value = left.pop(name)
        elif d in left:
            value = left.pop(d)
        else:
            pairs.append((None, None))
            continue
        if isinstance(value, str):
            pairs.append((value, None))
        elif isinstance(value, tuple):
            pairs.append(value)
        else:
            pairs.append((None, value))
    if left:
        raise RuntimeError(f"Found invalid keys in backend_override: got {list(left)}, expected integers in range "
                           f"[0, {ndim}) or one of {names}")
    return tuple(pairs)


def init_device_mesh(device_type, mesh_shape, *, mesh_dim_names=None, backend_override=None):
    """A mesh of shape ``mesh_shape`` over global ranks 0, 1, ... in row-major order (``mesh_dim_names`` names its
    dimensions; ``backend_override`` maps a dimension's index or name to a backend and/or its options). Every rank
    calls it alike; it initialises the default process group first if needed."""
    if mesh_dim_names is not None:
        if len(set(mesh_dim_names)) != len(mesh_dim_names):
            raise RuntimeError(f"Each mesh_dim_name must be unique. Found repeated mesh_dim_name in mesh_dim_names "
                               f"{mesh_dim_names}")
        if len(mesh_shape) != len(mesh_dim_names):
            raise RuntimeError(f"mesh_shape and mesh_dim_names should have same length! Found len(mesh_dim_names): "
                               f"{len(mesh_dim_names)} and len(mesh_shape):{len(mesh_shape)}.")
    override = None
    if backend_override is not None:
        override = _normalize_backend_override(backend_override, len(mesh_shape), mesh_dim_names)
    if device_type and not device_type.isalpha():
        raise RuntimeError(f"Device type with index is not supported but got {device_type}. ",
                           "If you maintained a 'torch.device' object, it's recommended to pass in 'device.type'.")
    ranks = np.arange(math.prod(mesh_shape), dtype=np.int64).reshape(tuple(mesh_shape))
    return DeviceMesh(device_type, ranks, mesh_dim_names=mesh_dim_names, backend_override=override)
