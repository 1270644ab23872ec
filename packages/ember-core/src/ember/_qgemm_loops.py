"""numba loops of the integer product of ``ember._qgemm`` (loaded through ``ember._jit`` only, never by ``import
ember``; used only where the CPU has AVX-512 VNNI).

``gemm`` multiplies uint8 rows by an int8 weight packed as ``(panels, groups, NR * 16, 4)``: for each panel of
``NR * 16`` output columns and each group of 4 consecutive inputs, the 4 weight bytes of every column side by side.
A tile of ``MR`` (or fewer) rows by one panel keeps its ``MR * NR`` accumulators (16 int32 columns each) in
registers through all the groups: per group, ``NR`` 64-byte loads of the weight, one 4-byte broadcast per row, and
``MR * NR`` ``vpdpbusd`` (u8 x s8 products summed four at a time into int32 lanes, no saturation). Narrow weights
(up to 32 outputs) pack in panels of ``NARROW * 16`` columns instead. The tile is LLVM IR
written here (``_tiles``), as numba would widen the int32 products to int64 and never reach the instruction.
"""
import numba
from llvmlite import binding, ir
from numba.core import cgutils, types
from numba.core.extending import intrinsic

from ._numba_kernels import _load, _pointer_to
from ._numba_kernels import parts as _spinning

if not all(binding.get_host_cpu_features().get(f, False) for f in ("avx512f", "avx512bw", "avx512vnni")):
    raise ImportError("ember._qgemm_loops needs AVX-512 VNNI")  # (ember._jit then leaves the float path in place)

MR = 6  # rows per tile
# zmm registers of 16 int32 columns per tile: 6 x 4 accumulators, 4 weight vectors and a broadcast use 29 of 32; a
# weight of 32 outputs or fewer packs in panels of 2 (half of a 4-wide panel would be padding)
NR = 4
NARROW = 2
_I64, _I32 = ir.IntType(64), ir.IntType(32)
_V16 = ir.VectorType(_I32, 16)


def _emit(builder, mr, nr, table, requantize, args):
    """The IR of a tile of ``mr`` rows by a panel of ``nr`` vectors (see ``_tiles``) at the builder's position;
    leaves it at the tile's end."""
    a, lda, b, init, c, ldc, groups = args[:7]
    const = lambda v: ir.Constant(_I64, v)  # noqa: E731
    i8p = ir.IntType(8).as_pointer()
    dot = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_V16, [_V16] * 3),
                                         "llvm.x86.avx512.vpdpbusd.512")
    pa, pb, pc = (builder.inttoptr(v, i8p) for v in (a, b, c))
    vector_at = lambda p, offset: builder.bitcast(builder.gep(p, [offset]), _V16.as_pointer())  # noqa: E731
    start = [builder.load(vector_at(builder.inttoptr(init, i8p), const(64 * j)), align=4) for j in range(nr)]
    entry = builder.block
    loop = builder.append_basic_block(f"tile{nr}x{mr}.loop")
    done = builder.append_basic_block(f"tile{nr}x{mr}.done")
    builder.cbranch(builder.icmp_signed(">", groups, const(0)), loop, done)

    builder.position_at_end(loop)
    g = builder.phi(_I64)
    acc = [[builder.phi(_V16) for _ in range(nr)] for _ in range(mr)]
    g.add_incoming(const(0), entry)
    b_off = builder.mul(g, const(nr * 64))
    bv = [builder.load(vector_at(pb, builder.add(b_off, const(64 * j))), align=1) for j in range(nr)]
    if table:
        entry_ptr = builder.gep(builder.bitcast(builder.inttoptr(args[7], i8p), _I64.as_pointer()), [g])
        a_off = builder.load(entry_ptr, align=8)
    else:
        a_off = builder.mul(g, const(4))
    new = []
    for r in range(mr):
        p = builder.gep(pa, [builder.add(a_off, builder.mul(lda, const(r)))])
        word = builder.load(builder.bitcast(p, _I32.as_pointer()), align=1)
        v = builder.insert_element(ir.Constant(_V16, ir.Undefined), word, ir.Constant(_I32, 0))
        v = builder.shuffle_vector(v, ir.Constant(_V16, ir.Undefined), ir.Constant(_V16, None))  # broadcast
        new.append([builder.call(dot, [acc[r][j], v, bv[j]]) for j in range(nr)])
    g_next = builder.add(g, const(1))
    g.add_incoming(g_next, loop)
    for r in range(mr):
        for j in range(nr):
            acc[r][j].add_incoming(start[j], entry)
            acc[r][j].add_incoming(new[r][j], loop)
    builder.cbranch(builder.icmp_signed("<", g_next, groups), loop, done)

    builder.position_at_end(done)
    result = [[builder.phi(_V16) for _ in range(nr)] for _ in range(mr)]
    for r in range(mr):
        for j in range(nr):
            result[r][j].add_incoming(start[j], entry)
            result[r][j].add_incoming(new[r][j], loop)
    if requantize:
        _store_requantized(builder, result, args[8:11], pc, ldc, const)
        return
    for r in range(mr):
        for j in range(nr):
            offset = builder.mul(builder.add(builder.mul(ldc, const(r)), const(16 * j)), const(4))
            builder.store(result[r][j], vector_at(pc, offset), align=4)


def _tiles(table=False, requantize=False):
    """An intrinsic ``tile(rows, width, a, lda, b, init, c, ldc, groups)`` on addresses: ``c[r, :width] = init + sum
    over groups g of a[r, 4g:4g + 4] . b[g, :, :]`` for the ``rows`` (1 to MR) rows ``r`` of ``a`` (``lda`` bytes
    apart), a panel of ``width`` (NR * 16 or NARROW * 16) columns, ``c``'s rows ``ldc`` int32 apart: one block of IR
    per row count and width. With ``table``, a further address ``offsets`` (int64, one per group) says where each
    group's 4 bytes are from the row's start, instead of ``4g``: the rows are a convolution's windows, read in
    place. With ``requantize``, three more addresses (float32 ``add`` and ``multiplier`` of the panel's columns,
    then the output zero point, lower and upper bound) make ``c`` uint8 rows (``ldc`` bytes apart) of
    ``clamp(rint((float32(sum) + add) * multiplier) + zero_point)``, as ``ember._qloops.requantize`` computes
    them."""
    def codegen(context, builder, sig, args):
        end = builder.append_basic_block("tiles.end")
        widths = builder.switch(args[1], end)
        for nr in (NR, NARROW):
            block = builder.append_basic_block(f"tiles.{nr}")
            widths.add_case(ir.Constant(_I64, nr * 16), block)
            builder.position_at_end(block)
            rows = builder.switch(args[0], end)
            for mr in range(1, MR + 1):
                block = builder.append_basic_block(f"tiles.{nr}.{mr}")
                rows.add_case(ir.Constant(_I64, mr), block)
                builder.position_at_end(block)
                _emit(builder, mr, nr, table, requantize, args[2:])
                builder.branch(end)
        builder.position_at_end(end)
        return context.get_dummy_value()

    def typer(typingctx, rows, width, a, lda, b, init, c, ldc, groups):
        return types.void(*[types.intp] * 9), codegen

    def typer_table(typingctx, rows, width, a, lda, b, init, c, ldc, groups, offsets):
        return types.void(*[types.intp] * 10), codegen

    def typer_requantize(typingctx, rows, width, a, lda, b, init, c, ldc, groups, offsets, add, multiplier, bounds):
        return types.void(*[types.intp] * 13), codegen

    return intrinsic(typer_requantize if requantize else typer_table if table else typer)


_F16 = ir.VectorType(ir.FloatType(), 16)
_B16 = ir.VectorType(ir.IntType(8), 16)


def _store_requantized(builder, sums, params, pc, ldc, const):
    """Store tile ``sums`` (rows of NR vectors) requantized to uint8 (see ``_tile``)."""
    f32p = ir.FloatType().as_pointer()
    add, multiplier, bounds = (builder.bitcast(builder.inttoptr(v, ir.IntType(8).as_pointer()), f32p)
                               for v in params)
    declare = lambda name, n: cgutils.get_or_insert_function(  # noqa: E731
        builder.module, ir.FunctionType(_F16, [_F16] * n), f"llvm.{name}.v16f32")
    rint, upper, lower = declare("rint", 1), declare("minnum", 2), declare("maxnum", 2)

    def splat(i):
        v = builder.insert_element(ir.Constant(_F16, ir.Undefined), builder.load(builder.gep(bounds, [const(i)])),
                                   ir.Constant(_I32, 0))
        return builder.shuffle_vector(v, ir.Constant(_F16, ir.Undefined), ir.Constant(_V16, None))

    zero_point, lo, hi = splat(0), splat(1), splat(2)
    columns = [(builder.load(builder.bitcast(builder.gep(add, [const(16 * j)]), _F16.as_pointer()), align=4),
                builder.load(builder.bitcast(builder.gep(multiplier, [const(16 * j)]), _F16.as_pointer()), align=4))
               for j in range(len(sums[0]))]
    for r, row in enumerate(sums):
        for j, v in enumerate(row):
            y = builder.fmul(builder.fadd(builder.sitofp(v, _F16), columns[j][0]), columns[j][1])
            y = builder.fadd(builder.call(rint, [y]), zero_point)
            y = builder.call(upper, [builder.call(lower, [y, lo]), hi])
            q = builder.trunc(builder.fptosi(y, _V16), _B16)
            offset = builder.add(builder.mul(ldc, const(r)), const(16 * j))
            builder.store(q, builder.bitcast(builder.gep(pc, [offset]), _B16.as_pointer()), align=1)


_gemm_tile = _tiles()


@numba.njit(cache=True, nogil=True)
def gemm(a, b, init, c, m0, m1, p0, p1):
    """``c[m0:m1, panels p0:p1] = a[m0:m1] @ b + init`` (int32): ``a`` uint8 (M, 4 * groups), ``b`` the packed int8
    weight (panels, groups, width, 4) with ``width`` NR * 16 or NARROW * 16, ``init`` int32 (panels * width,), ``c``
    int32 (M, panels * width)."""
    groups, width = b.shape[1], b.shape[2]
    lda, ldc = a.shape[1], c.shape[1]
    for p in range(p0, p1):
        bp = b.ctypes.data + p * groups * width * 4
        ip = init.ctypes.data + p * width * 4
        for m in range(m0, m1, MR):
            ap = a.ctypes.data + m * lda
            cp = c.ctypes.data + (m * ldc + p * width) * 4
            _gemm_tile(min(MR, m1 - m), width, ap, lda, bp, ip, cp, ldc, groups)


_conv_tile = _tiles(table=True)
_requantized_tile = _tiles(table=True, requantize=True)


@numba.njit(cache=True, nogil=True)
def conv_gemm(x, b, init, offsets, params, c, out_h, out_w, row_step, col_step, n0, n1):
    """The sums of a 2-d convolution read in place from ``x``, its channels-last padded uint8 input (N, H, W, C4):
    ``c[(n * out_h + y) * out_w + j] = init + sum over groups g of window(n, y, j)[4g:4g + 4] . b[g]`` for images
    ``n0:n1``, where the window of output (y, j) starts ``y * row_step + j * col_step`` bytes into image n and its
    group g lies ``offsets[g]`` bytes further (kernel offset and channels). Tiles are rows of one output line.
    ``params`` empty: ``c`` int32 (rows, panels * width) takes the sums; else the sums are requantized in the tiles
    into ``c`` uint8, ``params`` (float32) holding ``add`` and ``multiplier`` per column (panels * width each), then
    the zero point, lower and upper bound."""
    groups, width, panels = b.shape[1], b.shape[2], b.shape[0]
    ldc = c.shape[1]
    image = x.shape[1] * x.shape[2] * x.shape[3]
    table = offsets.ctypes.data
    columns = panels * width
    requantize = params.size > 0
    bounds = params.ctypes.data + 2 * columns * 4
    for n in range(n0, n1):
        for y in range(out_h):
            line = x.ctypes.data + n * image + y * row_step
            first = (n * out_h + y) * out_w
            for p in range(panels):
                bp = b.ctypes.data + p * groups * width * 4
                ip = init.ctypes.data + p * width * 4
                ad = params.ctypes.data + p * width * 4
                mu = params.ctypes.data + (columns + p * width) * 4
                for j in range(0, out_w, MR):
                    ap = line + j * col_step
                    cp = c.ctypes.data + ((first + j) * ldc + p * width) * c.itemsize
                    if requantize:
                        _requantized_tile(min(MR, out_w - j), width, ap, col_step, bp, ip, cp, ldc, groups, table,
                                          ad, mu, bounds)
                    else:
                        _conv_tile(min(MR, out_w - j), width, ap, col_step, bp, ip, cp, ldc, groups, table)


_u8_at, _i8_at, _i32_at = _pointer_to(types.uint8), _pointer_to(types.int8), _pointer_to(types.int32)
_i64_at, _f32_at = _pointer_to(types.int64), _pointer_to(types.float32)


@numba.njit(inline="always")
def _gemm_arrays(block):
    """``gemm``'s arrays from a part's block: the addresses and sizes of a (M, K4), b (panels, groups, width, 4),
    init and c (M, ldc)."""
    m, k4, panels, groups, width, ldc = (_load(block + 8), _load(block + 16), _load(block + 32), _load(block + 40),
                                         _load(block + 48), _load(block + 72))
    return (numba.carray(_u8_at(_load(block)), (m, k4)),
            numba.carray(_i8_at(_load(block + 24)), (panels, groups, width, 4)),
            numba.carray(_i32_at(_load(block + 56)), (panels * width,)),
            numba.carray(_i32_at(_load(block + 64)), (m, ldc)))


@numba.njit(nogil=True, cache=True)
def pad_channels_last(x, zero_point, top, left, xl, n0, n1):
    """Images n0:n1 of uint8 ``x`` (N, C, H, W) channels last into ``xl`` (N, H', W', C4), at (top, left), the rest
    (padding and padding channels, which meet zero weights) ``zero_point``."""
    c, h, w = x.shape[1], x.shape[2], x.shape[3]
    for n in range(n0, n1):
        xl[n] = zero_point
        for ci in range(c):
            for y in range(h):
                for j in range(w):
                    xl[n, y + top, j + left, ci] = x[n, ci, y, j]


@numba.njit(inline="always")
def _conv_arrays(block):
    """A convolution part's arrays: x (N, C, H, W), xl (N, H', W', C4), b, init, offsets, params (see ``_Parts``)."""
    w = [_load(block + 8 * k) for k in range(28)]
    return (numba.carray(_u8_at(w[0]), (w[1], w[2], w[3], w[4])), numba.carray(_u8_at(w[5]), (w[1], w[6], w[7], w[8])),
            numba.carray(_i8_at(w[9]), (w[10], w[11], w[12], 4)), numba.carray(_i32_at(w[13]), (w[10] * w[12],)),
            numba.carray(_i64_at(w[14]), (w[15],)), numba.carray(_f32_at(w[16]), (w[17],)), w)


def _conv_part(block, lo, hi):
    x, xl, b, init, offsets, params, w = _conv_arrays(block)
    pad_channels_last(x, w[25], w[26], w[27], xl, lo, hi)
    conv_gemm(xl, b, init, offsets, params, numba.carray(_i32_at(w[18]), (w[19], w[20])), w[21], w[22], w[23], w[24],
              lo, hi)


def _conv_requantized_part(block, lo, hi):
    x, xl, b, init, offsets, params, w = _conv_arrays(block)
    pad_channels_last(x, w[25], w[26], w[27], xl, lo, hi)
    conv_gemm(xl, b, init, offsets, params, numba.carray(_u8_at(w[18]), (w[19], w[20])), w[21], w[22], w[23], w[24],
              lo, hi)


def _rows_part(block, lo, hi):
    a, b, init, c = _gemm_arrays(block)
    gemm(a, b, init, c, lo * MR, min(hi * MR, a.shape[0]), 0, b.shape[0])


def _panels_part(block, lo, hi):
    a, b, init, c = _gemm_arrays(block)
    gemm(a, b, init, c, 0, a.shape[0], lo, hi)


class _Parts:
    """C-callable parts ``part(block, lo, hi)`` of ``gemm`` that ``ember._parallel.spun`` runs on its spinning
    helpers (with ember._numba_kernels' run and serve): "rows" takes tiles of MR rows lo:hi, "panels" panels lo:hi
    (``block``, int64: a's address, M, K4, b's address, panels, groups, width, init's and c's addresses, and c's row
    length); "conv" and "conv_requantized" pad images lo:hi channels last and run ``conv_gemm`` on them (int32 sums,
    or requantized uint8)
    (``block``: x's address and shape (N, C, H, W), xl's address, H', W', C4, b's address, panels, groups, width,
    init's address, offsets' address and length, params' address and length, c's address, rows and row length,
    out_h, out_w, row_step, col_step, the zero point, top and left padding). ``compile(key)`` makes one; its address
    is in ``address``."""

    def __init__(self):
        self.address, self._made = {}, []

    def compile(self, key):
        part = {"rows": _rows_part, "panels": _panels_part, "conv": _conv_part,
                "conv_requantized": _conv_requantized_part}[key]
        made = numba.cfunc(types.void(types.intp, types.intp, types.intp), nogil=True)(part)
        _spinning.run.compile("(int64[::1], int64, int64[::1], int64, int64)")
        _spinning.serve.compile("(int64[::1], int64)")
        self._made.append(made)
        self.address[key] = made.address


parts = _Parts()
