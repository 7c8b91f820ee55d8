"""The differential fuzzer's generator (tests/fuzz_programs.py): its state, Gen (the program so far,
run line by line on fastgrad so that drawers see real shapes), and the drawers that fill a template's
{placeholders} (a tensor of some dtype, a broadcastable partner, dims, an index, ...).
"""

import functools
import warnings

import numpy as np
from hypothesis import strategies as st

import fastgrad

from fuzz_run import ANY, FLOAT, NUM, Leaf, Program, _compiled, _leaf_tensor, _literal, dtype_name

# ---------------------------------------------------------------------------------------------
# The generator's state: the program so far, and its values as fastgrad tensors.

SIZES = [2, 3, 1, 4, 2, 3, 1, 2, 3, 1, 4, 2, 3, 0]  # dim sizes, simplest first (hypothesis shrinks towards the front)
RANKS = [1, 2, 0, 3, 2, 1, 4]
SCALARS = ["2", "0.5", "-1", "1.5", "3", "-2.5", "0", "1", "-0.5"]


@functools.lru_cache(maxsize=4096)
def _sampled_from(options):
    return st.sampled_from(options)


@functools.lru_cache(maxsize=4096)
def _integers(lo, hi):
    return st.integers(lo, hi)


def sampled_from(options):
    """st.sampled_from(options), one strategy per distinct list: a new strategy computes its label
    (a hash of the options) on its first draw, which took most of the fuzzer's generation time. The
    cached one draws the same values (its label is computed from the same options)."""
    try:
        return _sampled_from(tuple(options))
    except TypeError:  # unhashable options
        return st.sampled_from(options)


class Gen:
    def __init__(self, draw, dtype):
        self.draw = draw
        self.program = Program(dtype)
        self.ns = {"torch": fastgrad, "np": np}

    # -- hypothesis draws (each shrinks towards its first / most common option)
    def choice(self, options):
        return self.draw(sampled_from(options))

    def integer(self, lo, hi):
        return self.draw(_integers(lo, hi))

    def rarely(self, percent=5):
        return self.draw(_integers(0, 99)) >= 100 - percent

    # -- values
    def tensor(self, name):
        return self.ns[name]

    def meta(self, name):
        t = self.ns[name]
        return tuple(t.shape), dtype_name(t.dtype)

    def _is_leaf_requiring_grad(self, name):
        try:
            return self.tensor(name).is_leaf and self.tensor(name).requires_grad
        except RuntimeError:  # a view made under no_grad whose memory was written since: is_leaf raises
            return False

    def run(self, line):
        """Adds a line to the program, running it on fastgrad; returns False if it raised."""
        self.program.lines.append(line)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                exec(_compiled(line), self.ns)
            except Exception:  # noqa: BLE001 -- the program ends with this error
                return False
        return True

    def evaluate(self, expression):
        """Runs an expression on fastgrad without adding it to the program (None if it raises)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                return eval(_compiled_eval(expression), self.ns)
            except Exception:  # noqa: BLE001
                return None

    def new_value(self, line_template):
        name = f"v{len(self.program.values) - len(self.program.leaves)}"
        ok = self.run(line_template.format(out=name))
        # (a 0-d tensor compared with an ndarray is a Python bool, in PyTorch too: not a value)
        if ok and isinstance(self.ns[name], fastgrad.Tensor):
            self.program.values.append(name)
        return ok

    def finish(self):
        """The program, its loss made of every float value."""
        self.program.floats = [name for name in self.program.values if self.meta(name)[1] in FLOAT]
        return self.program

    def shape(self, rank=None):
        rank = self.choice(RANKS) if rank is None else rank
        return tuple(self.choice(SIZES) for _ in range(rank))

    def leaf(self, shape=None, dtype=None, requires_grad=None):
        """A new leaf input. Float leaves hold small dyadic numbers (exact in float32, with ties
        and zeros) or, seeded, standard normal values; integer leaves small integers."""
        shape = self.shape() if shape is None else tuple(shape)
        dtype = dtype or self.program.dtype
        n = int(np.prod(shape))
        if dtype == "bool":
            array = np.array(self.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
        elif dtype == "int64":
            array = np.array(self.draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n)), dtype=np.int64)
        elif self.choice(["grid", "normal"]) == "grid":
            array = np.array(self.draw(st.lists(st.integers(-8, 8), min_size=n, max_size=n)), dtype=np.float64) / 4
        else:
            array = np.random.default_rng(self.integer(0, 2**16)).standard_normal(n).round(3)
        array = array.reshape(shape).astype(dtype if dtype != "bool" else bool)
        if requires_grad is None:
            requires_grad = dtype in FLOAT and not self.rarely(15)
        leaf = Leaf(f"x{len(self.program.leaves)}", array, dtype, requires_grad)
        self.program.leaves.append(leaf)
        self.program.values.insert(len(self.program.leaves) - 1, leaf.name)
        self.ns[leaf.name] = _leaf_tensor(fastgrad, leaf)
        return leaf.name

    def pick(self, dtypes=FLOAT, accept=None, fresh_shape=None, target=False, exclude=None):
        """A value of the program (usually the newest that fits) or a new leaf. `accept(shape)`
        filters by shape, `fresh_shape()` makes the shape of a new leaf. Now and then the dtype is
        any (promotion and dtype errors). `target`: about to be written in place, so prefer values
        that may be (not leaves requiring grad)."""
        if self.rarely(4):
            dtypes = ANY
        candidates = []
        for name in self.program.values:
            if name == exclude:
                continue
            shape, dtype = self.meta(name)
            if dtype in dtypes and (accept is None or accept(shape)):
                if not target or not self._is_leaf_requiring_grad(name):
                    candidates.append(name)
        if candidates and not self.rarely(12):
            return candidates[-1] if self.draw(st.booleans()) else self.choice(candidates)
        dtype = self.program.dtype if self.program.dtype in dtypes else dtypes[0]
        if self.rarely(10):
            dtype = self.choice(dtypes)
        return self.leaf(
            fresh_shape() if fresh_shape else None,
            dtype,
            requires_grad=False if target and not self.rarely(10) else None,
        )


@functools.lru_cache(maxsize=None)
def _compiled_eval(expression):
    return compile(expression, "<program>", "eval")


# ---------------------------------------------------------------------------------------------
# Drawers: each fills one placeholder of an op template, given the placeholders drawn before it
# (`got`: placeholder -> text). Tensors are named by their variable.


def tensor(dtypes=FLOAT, rank=None, min_rank=0, target=False):
    """A value of one of `dtypes` (of a rank in `rank` / at least `min_rank`), or a new leaf."""
    ranks = (rank,) if isinstance(rank, int) else rank

    def drawer(g, got):
        def accept(shape):
            return (ranks is None or len(shape) in ranks) and len(shape) >= min_rank

        fresh = None
        if ranks or min_rank:
            fresh = lambda: g.shape(g.choice(ranks) if ranks else max(min_rank, g.choice(RANKS)))  # noqa: E731
        return g.pick(dtypes, accept, fresh, target)

    return drawer


def _broadcastable(a, b):
    return all(x == y or x == 1 or y == 1 for x, y in zip(a[::-1], b[::-1]))


def _broadcast_into(a, b):
    """b broadcasts to exactly shape a."""
    return len(b) <= len(a) and all(y in (x, 1) for x, y in zip(a[::-1], b[::-1]))


def _partner_shape(g, shape, into):
    """A shape broadcastable with `shape` (`into`: that broadcasts to `shape`)."""
    out = []
    for n in shape:
        option = g.choice(["same", "one", "other"])
        out.append(n if option == "same" else 1 if option == "one" else (g.choice(SIZES) if n == 1 and not into else n))
    if g.draw(st.booleans()):
        out = out[g.integer(0, len(out)) :]  # drop leading dims
    elif not into and g.rarely(25):
        out = [g.choice(SIZES)] + out
    if g.rarely(4) and out:  # not broadcastable, most of the time
        k = g.integer(0, len(out) - 1)
        out[k] += 2
    return tuple(out)


def partner(of, dtypes=None, into=False, not_itself=False):
    """A tensor broadcastable with placeholder `of` (`into`: broadcasting to its shape, as the
    other operand of an in-place op). Mostly of the same dtype; sometimes a 0-d or another dtype."""

    def drawer(g, got):
        shape, dtype = g.meta(got[of])
        allowed = dtypes or ((dtype,) + tuple(d for d in NUM if d != dtype) if dtype in NUM else (dtype,))
        fits = (lambda s: _broadcast_into(shape, s)) if into else (lambda s: _broadcastable(shape, s))
        if g.rarely(20):  # other dtype, often as a 0-d tensor: promotion rules
            allowed = tuple(d for d in allowed[1:] if d != dtype) or allowed
            if g.draw(st.booleans()):
                return g.leaf((), g.choice(allowed))
        return g.pick(
            allowed[:1] if not g.rarely(10) else allowed,
            fits,
            lambda: _partner_shape(g, shape, into),
            exclude=got[of] if not_itself else None,
        )

    return drawer


def bool_partner(of):
    """A bool tensor broadcastable with `of` (a condition for where)."""

    def drawer(g, got):
        shape, _ = g.meta(got[of])
        return g.pick(("bool",), lambda s: _broadcastable(shape, s), lambda: _partner_shape(g, shape, False))

    return drawer


def scalar(kinds=SCALARS):
    return lambda g, got: g.choice(kinds)


def options(*texts):
    return lambda g, got: g.choice(texts)


def _dim(g, rank, *, wrong=True):
    n = max(rank, 1)
    if wrong and g.rarely(3):
        return g.choice([n, -n - 1])
    return g.integer(-n, n - 1)


def _dim_list(g, rank):
    dims = sorted({_dim(g, rank) % max(rank, 1) for _ in range(g.integer(1, max(rank, 1)))})
    dims = [d - rank if rank and g.rarely(30) else d for d in dims]
    if g.rarely(3):
        dims.append(dims[0])  # repeated dim
    return dims


def reduce_args(of, multi=True, optional=True, keepdim=True, extra=(), dim_keyword=False):
    """Arguments of a reduction: dim (int, tuple or none), keepdim, and one of `extra`."""

    def drawer(g, got):
        rank = len(g.meta(got[of])[0])
        args = []
        form = g.choice((["none"] if optional else []) + ["int"] + (["tuple"] if multi else []))
        if form == "int":
            args.append(("dim=" if dim_keyword else "") + str(_dim(g, rank)))
        elif form == "tuple":
            dims = _dim_list(g, rank)
            args.append(f"dim={tuple(dims)}" if dim_keyword or g.draw(st.booleans()) else str(tuple(dims)))
        if form != "none" and keepdim and g.draw(st.booleans()):
            args.append("keepdim=True")
        if extra and g.draw(st.booleans()):
            args.append(g.choice(extra))
        return ", ".join(args)

    return drawer


def dim(of, extra=0, wrong=True):
    """A dim of `of` (extra=1: one past the end too, as unsqueeze and stack take)."""
    return lambda g, got: str(_dim(g, len(g.meta(got[of])[0]) + extra, wrong=wrong))


def permutation(of):
    def drawer(g, got):
        rank = len(g.meta(got[of])[0])
        dims = list(g.draw(st.permutations(range(rank))))
        if dims and g.rarely(10):
            dims[0] -= rank
        if g.rarely(3):
            dims = dims[1:] if dims else [0]
        return ", ".join(map(str, dims)) if g.draw(st.booleans()) or not dims else str(tuple(dims))

    return drawer


def _factor(g, n, rank):
    """`rank` sizes whose product is n."""
    sizes = []
    for _ in range(rank - 1):
        divisors = [d for d in range(1, min(n, 6) + 1) if n % d == 0] if n else [0, 1, 2, 3]
        d = g.choice(divisors)
        sizes.append(d)
        n = n // d if d else (n if n else g.choice([1, 2]))
    sizes.append(n)
    return sizes


def new_shape(of, as_tuple=False):
    """A shape with as many elements as `of` (reshape/view), sometimes with -1 or wrong."""

    def drawer(g, got):
        shape = g.meta(got[of])[0]
        sizes = _factor(g, int(np.prod(shape)), g.choice([1, 2, 3, 0, 4]))
        if sizes and g.rarely(30):
            sizes[g.integer(0, len(sizes) - 1)] = -1
        if g.rarely(4):
            sizes.append(2)
        return ", ".join(map(str, sizes)) if sizes and not as_tuple and g.draw(st.booleans()) else str(tuple(sizes))

    return drawer


def expand_sizes(of):
    def drawer(g, got):
        shape = g.meta(got[of])[0]
        sizes = [g.choice([n, n, -1, 2, 3]) if n == 1 else g.choice([n, -1]) for n in shape]
        sizes = [g.choice([1, 2, 3]) for _ in range(g.choice([0, 0, 1, 2]))] + sizes
        if g.rarely(4) and sizes:
            sizes[-1] = 5
        return ", ".join(map(str, sizes)) if sizes and g.draw(st.booleans()) else str(tuple(sizes))

    return drawer


def squeeze_args(of):
    def drawer(g, got):
        rank = len(g.meta(got[of])[0])
        form = g.choice(["none", "int", "tuple"])
        return "" if form == "none" else str(_dim(g, rank)) if form == "int" else str(tuple(_dim_list(g, rank)))

    return drawer


def flatten_args(of):
    def drawer(g, got):
        rank = len(g.meta(got[of])[0])
        start, end = sorted((_dim(g, rank), _dim(g, rank)), key=lambda d: d % max(rank, 1))
        if g.rarely(5):
            start, end = end, start
        form = g.choice(["both", "none", "start"])
        return "" if form == "none" else str(start) if form == "start" else f"{start}, {end}"

    return drawer


def matmul_partner(of, kind="matmul"):
    """The right operand of a product: the inner size matches (mostly); the rank depends on
    `kind` (matmul: any; mm/bmm/mv/dot: theirs), batch dims broadcast."""

    def drawer(g, got):
        shape = g.meta(got[of])[0]
        k = shape[-1] if shape else 2
        if g.rarely(5):
            k += 1
        m = g.choice(SIZES)
        if kind == "dot" or kind == "mv":
            wanted = (k,)
        elif kind == "mm":
            wanted = (k, m)
        elif kind == "bmm":
            wanted = (shape[0] if len(shape) == 3 else 2, k, m)
        else:
            rank = g.choice([2, 1, 3, 4])
            batch = _partner_shape(g, shape[:-2], False) if len(shape) > 2 else ()
            extra = tuple(g.choice(SIZES) for _ in range(max(rank - 2 - len(batch), 0)))
            wanted = (k,) if rank == 1 else (extra + batch)[-max(rank - 2, 0) :] + (k, m) if rank > 2 else (k, m)
        dtype = g.meta(got[of])[1]
        return g.pick((dtype,), lambda s: s == wanted, lambda: wanted)

    return drawer


def cat_args(of, stack=False):
    """[a, b, ...], dim: tensors whose shapes agree except along dim (all equal for stack)."""

    def drawer(g, got):
        shape, dtype = g.meta(got[of])
        d = _dim(g, len(shape) + (1 if stack else 0))
        names = [got[of]]
        for _ in range(g.choice([1, 0, 2])):
            other = list(shape)
            if not stack and shape and g.draw(st.booleans()):
                other[d % len(shape)] = g.choice(SIZES)
            if g.rarely(4) and other:
                other[0] += 1
            names.append(g.pick((dtype,), lambda s, o=tuple(other): s == o, lambda o=tuple(other): o))
        return f"[{', '.join(names)}], {'dim=' if g.draw(st.booleans()) else ''}{d}"

    return drawer


def _index_item(g, n, for_set):
    """One index item for a dim of size n, and how many dims it consumes."""
    kind = g.choice(["slice", "int", "none", "list", "tensor", "slice", "mask"])
    if kind == "int" and (n or g.rarely(10)):
        return str(g.integer(-n, n - 1) if n and not g.rarely(3) else n), 1
    if kind in ("list", "tensor", "mask") and (n or kind == "mask"):
        if kind == "mask":
            values = [g.draw(st.booleans()) for _ in range(n)]
            return f"torch.tensor({values}, dtype=torch.bool)", 1
        count = g.choice([2, 1, 3, 0])
        if for_set:  # distinct positions: duplicate writes have no defined winner
            values = list(g.draw(st.permutations(range(n))))[:count]
            values = [v - n if g.rarely(30) else v for v in values]
        else:
            values = [g.integer(-n, n - 1) for _ in range(count)]
        if kind == "list":
            return str(values), 1
        if not for_set and len(values) == 2 and g.draw(st.booleans()):
            return f"torch.tensor([{values}])", 1  # a 2-D index tensor
        return f"torch.tensor({values}, dtype=torch.int64)", 1
    if kind == "none":
        return "None", 0
    start = g.choice(["", "", "1", "-1", "0", "2", "-2", "5"])
    stop = g.choice(["", "", "-1", "2", "1", "3", "0"])
    step = g.choice(["", "", "2", "3", "1"]) if not g.rarely(2) else "-1"
    return f"{start}:{stop}" + (f":{step}" if step else ""), 1


def index_key(of, for_set=False):
    """A key for x[key]: ints, slices (with steps), None, ..., index lists/tensors, masks. Items
    before a "..." index x's first dims, items after it its last ones."""

    def drawer(g, got):
        shape = g.meta(got[of])[0]
        if g.rarely(10):  # a bool mask of some other value with the same shape
            masks = [name for name in g.program.values if g.meta(name) == (shape, "bool")]
            if masks:
                return g.choice(masks)
        count = g.choice([1, 2, 1, 3, 0])
        ellipsis_at = g.integer(0, count) if g.rarely(20) else None
        front, back = 0, len(shape) - 1  # the next dims an item indexes, from either end
        items = []
        for k in range(count):
            from_back = ellipsis_at is not None and k >= ellipsis_at
            dim = back if from_back else front
            if front <= back and not g.rarely(3):
                text, used = _index_item(g, shape[dim], for_set)
            else:
                text, used = "None", 0
            if text.startswith(("torch.tensor", "[")) and any(i.startswith(("torch.tensor", "[")) for i in items):
                # several advanced indices: tensors, not lists (and, for writes, one at most)
                text = ":" if for_set or text.startswith("[") else text
            items.append(text)
            if from_back:
                back -= used
            else:
                front += used
        if ellipsis_at is not None:  # the items after it were drawn from the last dim backwards
            items = items[:ellipsis_at] + ["..."] + items[ellipsis_at:][::-1]
        if len(items) == 1 and not items[0].startswith("[") and g.draw(st.booleans()):
            return items[0]
        return ", ".join(items) + ("," if len(items) == 1 else "") if items else "..."

    return drawer


def setitem_value(of, key):
    """A scalar, or a tensor broadcasting to the shape of x[key] (not x itself: see OVERLAP in
    the README of this file)."""

    def drawer(g, got):
        target = g.evaluate(f"{got[of]}[{got[key]}]")
        if target is None or g.draw(st.booleans()):
            return g.choice(SCALARS)
        shape = tuple(target.shape)
        return g.pick(
            (g.meta(got[of])[1],),
            lambda s: _broadcast_into(shape, s),
            lambda: _partner_shape(g, shape, True),
            exclude=got[of],
        )

    return drawer


NUMPY_SCALARS = [
    "np.float64(0.5)",
    "np.float32(2)",
    "np.int64(3)",
    "np.int32(-1)",
    "np.bool_(True)",
    "np.float64(-1.5)",
    "np.float32(0)",
]


def numpy_operand(of):
    """A numpy scalar, or a numpy array (float64, float32 or int64) broadcastable with `of`: numpy
    on either side of an operator decides by itself what to do with a tensor (__array__,
    __array_priority__), and the gradient must not be lost on the way."""

    def drawer(g, got):
        if g.draw(st.booleans()):
            return g.choice(NUMPY_SCALARS)
        shape = _partner_shape(g, g.meta(got[of])[0], False)
        dtype = g.choice(["float64", "float32", "int64"])
        values = (
            np.array(
                g.draw(st.lists(st.integers(-6, 6), min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))),
                dtype=np.float64,
            ).reshape(shape)
            / 2
        )
        if not values.size:
            return f"np.zeros({shape}, dtype=np.{dtype})"
        return f"np.array({_literal(values.astype(dtype))}, dtype=np.{dtype})"

    return drawer


def last_dims(of):
    """The sizes of `of`'s last dim (or last two), as layer_norm's normalized_shape."""

    def drawer(g, got):
        shape = g.meta(got[of])[0]
        return str(list(shape[-g.choice([1, 2]) :]) if shape else [1])

    return drawer


def class_targets(of, ignore=False):
    """Class indices for an (N, C) or (C,) input `of`: an int64 tensor of N (or 0-d) values in [0, C)."""

    def drawer(g, got):
        shape = g.meta(got[of])[0]
        classes = shape[1] if len(shape) > 1 else shape[0] if shape else 1
        count = shape[0] if len(shape) > 1 else None
        values = [g.integer(0, max(classes - 1, 0)) for _ in range(count or 1)]
        if ignore and values and g.rarely(30):
            values[0] = -100
        return f"torch.tensor({values if count is not None else values[0]})"

    return drawer


def indices_into(of):
    """An int64 tensor of row indices of `of` (embedding)."""

    def drawer(g, got):
        rows = g.meta(got[of])[0][0] if g.meta(got[of])[0] else 1
        values = [g.integer(0, max(rows - 1, 0)) for _ in range(g.choice([2, 1, 3, 4]))]
        return f"torch.tensor({values})"

    return drawer


def conv_weight(of):
    """A convolution weight for input `of` (rank 3: conv1d, 4: conv2d): its channels (dim 1) and
    kernel sizes up to the input's spatial sizes, mostly; now and then too many channels or too big."""

    def drawer(g, got):
        shape, dtype = g.meta(got[of])
        channels = shape[1] if len(shape) > 1 else 1
        kernel = tuple(g.integer(1, max(n, 1)) for n in shape[2:])
        if g.rarely(8):
            channels += 1
        wanted = (g.choice([1, 2, 3]), channels) + kernel
        return g.pick((dtype,), lambda s: s == wanted, lambda: wanted)

    return drawer


# scatter/gather/index family (issue 13)
def _along(g, got, of, d):
    """`of`'s shape (a 0-d one as [1]) and the dim `d` drawn for it, wrapped."""
    shape = list(g.meta(got[of])[0]) or [1]
    return shape, int(got[d]) % len(shape)


def along_index(of, d):
    """An int64 index for gather/scatter along dim `d` of `of`: `of`'s shape with 1 to 3 entries along
    d, each a position along d (rarely one past the end: PyTorch's bounds error)."""

    def drawer(g, got):
        shape, dim = _along(g, got, of, d)
        size, shape[dim] = shape[dim], g.choice([1, 2, 3])
        values = [g.integer(0, max(size - 1, 0)) for _ in range(int(np.prod(shape)))]
        if values and g.rarely(30):
            values[0] = size
        return f"torch.tensor({values}, dtype=torch.int64).reshape({shape})"

    return drawer


def positions_along(of, d=None):
    """An int64 vector of positions along dim `d` of `of` (None: dim 0) for index_select, index_add,
    ...; none along a size-0 dim (PyTorch's index_fill fails there with an error about its storage)."""

    def drawer(g, got):
        shape, dim = _along(g, got, of, d) if d else (list(g.meta(got[of])[0]) or [1], 0)
        values = [g.integer(0, shape[dim] - 1) for _ in range(g.choice([2, 1, 3]) if shape[dim] else 0)]
        return f"torch.tensor({values}, dtype=torch.int64)"

    return drawer
