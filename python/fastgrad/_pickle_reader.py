"""A pickle reader that runs no code from the file: the weights-only unpickler of fastgrad.load.

It interprets the opcodes PyTorch checkpoints use (protocol 2, plus the plain-data opcodes of
protocols 3 and 4) on a stack machine of its own. GLOBAL imports nothing: the name is looked up in
the caller's allow-list, which maps "module.name" to an object of the caller's (a rebuild function,
a dtype, OrderedDict...). REDUCE, NEWOBJ and BUILD apply only to those objects. Anything else is
refused with PyTorch's weights_only wording, raised as pickle.UnpicklingError.
"""

import _compat_pickle
import collections
import pickle
import reprlib
import struct
from pickle import UnpicklingError

# torch._weights_only_unpickler refuses these modules outright, before its allow-list
BLOCKED_MODULES = ("sys", "os", "posix", "nt")
_MAX_MARK_DEPTH = 1000  # nested MARKs (tuples, lists, dicts being filled) a file may open


def _global_name(module, name):
    """The dotted path of a GLOBAL, Python 2 names mapped to Python 3's as pickle does."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        module, name = _compat_pickle.NAME_MAPPING[(module, name)]
    elif module in _compat_pickle.IMPORT_MAPPING:
        module = _compat_pickle.IMPORT_MAPPING[module]
    return module, name


def _unsupported_global(full_path, api):
    if full_path.startswith("builtins."):  # PyTorch names builtins without their module
        full_path = full_path[len("builtins.") :]
    return UnpicklingError(
        f"Unsupported global: GLOBAL {full_path} was not an allowed global by default. "
        f"Please use `{api}.add_safe_globals([{full_path}])` or the "
        f"`{api}.safe_globals([{full_path}])` context manager to allowlist this global "
        "if you trust this class/function."
    )


class WeightsOnlyUnpickler:
    """load() reads one pickle from `data` (bytes). allowed: {"module.name": object} for GLOBAL;
    callables among the values may be called by REDUCE, types by NEWOBJ (cls.__new__(cls, *args));
    builders: {type: function(instance, state)} for BUILD; persistent_load(pid) turns a BINPERSID
    id into an object. api: the module whose add_safe_globals the errors point to."""

    def __init__(self, data, allowed, builders, persistent_load, api="torch.serialization"):
        self.data, self.position = memoryview(data), 0
        self.allowed, self.builders, self.persistent_load = allowed, builders, persistent_load
        self.api = api
        self.callables = [v for v in allowed.values() if callable(v)]
        self.memo, self.stack, self.metastack = {}, [], []

    def read(self, n):
        chunk = self.data[self.position : self.position + n]
        if len(chunk) < n:
            raise UnpicklingError("pickle data was truncated")
        self.position += n
        return bytes(chunk)

    def readline(self):
        end = bytes(self.data[self.position : self.position + 512]).find(b"\n")
        if end < 0:
            raise UnpicklingError("pickle data was truncated (or a GLOBAL name is too long)")
        return self.read(end + 1)[:-1].decode("utf-8")

    def load(self):
        try:
            while True:
                opcode = self.read(1)
                if opcode == pickle.STOP:
                    return self.stack.pop()
                handler = _HANDLERS.get(opcode)
                if handler is None:
                    raise UnpicklingError(f"Unsupported operand {opcode[0]}")
                handler(self)
        except (IndexError, KeyError) as e:  # an empty stack, a missing MARK or memo entry
            raise UnpicklingError(f"malformed pickle ({type(e).__name__}: {e})") from None
        except UnicodeDecodeError as e:
            raise UnpicklingError(f"malformed pickle string ({e})") from None

    # ---- helpers of the handlers

    def push(self, value):
        self.stack.append(value)

    def pop_mark(self):
        items = self.stack
        self.stack = self.metastack.pop()
        return items

    def unpack(self, fmt):
        return struct.unpack(fmt, self.read(struct.calcsize(fmt)))[0]

    def find_global(self, module, name):
        module, name = _global_name(module, name)
        full_path = f"{module}.{name}"
        if module in BLOCKED_MODULES:
            raise UnpicklingError(f"Trying to load unsupported GLOBAL {full_path} whose module {module} is blocked.")
        if full_path not in self.allowed:
            raise _unsupported_global(full_path, self.api)
        return self.allowed[full_path]

    def is_allowed(self, obj):
        return any(obj is c for c in self.callables)

    def call(self, func, args):
        if not self.is_allowed(func) or type(args) is not tuple:
            message = f"Trying to call reduce for unrecognized function {func}"
            if hasattr(func, "__self__"):
                message += f" which belongs to {func.__self__}"
            raise UnpicklingError(message)
        try:
            return func(*args)
        except (TypeError, ValueError, OverflowError, AttributeError) as e:  # arguments a function does not take
            raise UnpicklingError(f"malformed pickle: {func.__name__}{reprlib.repr(args)}: {e}") from None

    def set_items(self, target, items, opcode):
        if type(target) not in (dict, collections.OrderedDict, collections.Counter):
            raise UnpicklingError(
                f"Can only {opcode} for dict, collections.OrderedDict, collections.Counter, but got {type(target)}"
            )
        if len(items) % 2:
            raise UnpicklingError("malformed pickle: SETITEMS with an odd number of items")
        try:
            for i in range(0, len(items), 2):
                target[items[i]] = items[i + 1]
        except TypeError as e:  # an unhashable key
            raise UnpicklingError(f"malformed pickle: {e}") from None


def _mark(u):
    if len(u.metastack) >= _MAX_MARK_DEPTH:
        raise UnpicklingError(f"pickle nested deeper than {_MAX_MARK_DEPTH} levels")
    u.metastack.append(u.stack)
    u.stack = []


def _global(u):
    module = u.readline()
    u.push(u.find_global(module, u.readline()))


def _stack_global(u):
    name, module = u.stack.pop(), u.stack.pop()
    if type(module) is not str or type(name) is not str:
        raise UnpicklingError("STACK_GLOBAL requires str")
    u.push(u.find_global(module, name))


def _reduce(u):
    args = u.stack.pop()
    u.stack[-1] = u.call(u.stack[-1], args)


def _newobj(u):
    args, cls = u.stack.pop(), u.stack.pop()
    if not isinstance(cls, type) or not u.is_allowed(cls) or type(args) is not tuple:
        raise UnpicklingError(
            f"Can only create new object for nn.Parameter or classes allowlisted via `add_safe_globals` but got {cls}"
        )
    try:
        u.push(cls.__new__(cls, *args))  # Parameter.__new__ builds the whole Parameter
    except (TypeError, ValueError, AttributeError) as e:
        raise UnpicklingError(f"malformed pickle: {cls.__name__}{reprlib.repr(args)}: {e}") from None


def _build(u):
    state = u.stack.pop()
    instance = u.stack[-1]
    builder = u.builders.get(type(instance))
    if builder is None:
        raise UnpicklingError(
            "Can only build Tensor, Parameter, OrderedDict or types allowlisted "
            f"via `add_safe_globals`, but got {type(instance)}"
        )
    builder(instance, state)


def _append(u):
    item = u.stack.pop()
    if type(u.stack[-1]) is not list:
        raise UnpicklingError(f"Can only append to lists, but got {type(u.stack[-1])}")
    u.stack[-1].append(item)


def _appends(u):
    items = u.pop_mark()
    if type(u.stack[-1]) is not list:
        raise UnpicklingError(f"Can only extend lists, but got {type(u.stack[-1])}")
    u.stack[-1].extend(items)


def _setitem(u):
    value, key = u.stack.pop(), u.stack.pop()
    u.set_items(u.stack[-1], [key, value], "SETITEM")


def _setitems(u):
    items = u.pop_mark()
    u.set_items(u.stack[-1], items, "SETITEMS")


def _additems(u):
    items = u.pop_mark()
    if type(u.stack[-1]) is not set:
        raise UnpicklingError(f"Can only add items to sets, but got {type(u.stack[-1])}")
    try:
        u.stack[-1].update(items)
    except TypeError as e:
        raise UnpicklingError(f"malformed pickle: {e}") from None


def _tuple_of(n):
    def handler(u):
        items = tuple(u.stack[len(u.stack) - n :]) if n else ()
        if len(items) != n:
            raise UnpicklingError("malformed pickle: stack underflow")
        del u.stack[len(u.stack) - n :]
        u.push(items)

    return handler


def _persid(u):
    pid = u.stack.pop()
    if type(pid) is not tuple and type(pid) is not int:
        raise UnpicklingError(f"persistent_load id must be tuple or int, but got {type(pid)}")
    u.push(u.persistent_load(pid))


def _put(fmt):
    def handler(u):
        u.memo[u.unpack(fmt)] = u.stack[-1]

    return handler


def _get(fmt):
    def handler(u):
        u.push(u.memo[u.unpack(fmt)])

    return handler


def _memoize(u):
    u.memo[len(u.memo)] = u.stack[-1]


def _text(length_fmt):
    def handler(u):
        u.push(str(u.read(u.unpack(length_fmt)), "utf-8", "surrogatepass"))

    return handler


def _bytes(length_fmt):
    def handler(u):
        u.push(u.read(u.unpack(length_fmt)))

    return handler


def _long(length_fmt):
    def handler(u):
        n = u.unpack(length_fmt)
        if n < 0:
            raise UnpicklingError("LONG pickle has negative byte count")
        u.push(pickle.decode_long(u.read(n)))

    return handler


def _proto(u):
    u.proto = u.read(1)[0]
    if u.proto > pickle.HIGHEST_PROTOCOL:
        raise UnpicklingError(f"unsupported pickle protocol: {u.proto}")


def _frozenset(u):
    try:
        u.push(frozenset(u.pop_mark()))
    except TypeError as e:
        raise UnpicklingError(f"malformed pickle: {e}") from None


_HANDLERS = {
    pickle.PROTO: _proto,
    pickle.FRAME: lambda u: u.read(8),  # framing only groups opcodes: nothing to do
    pickle.MARK: _mark,
    pickle.GLOBAL: _global,
    pickle.STACK_GLOBAL: _stack_global,
    pickle.REDUCE: _reduce,
    pickle.NEWOBJ: _newobj,
    pickle.BUILD: _build,
    pickle.APPEND: _append,
    pickle.APPENDS: _appends,
    pickle.SETITEM: _setitem,
    pickle.SETITEMS: _setitems,
    pickle.ADDITEMS: _additems,
    pickle.TUPLE: lambda u: u.push(tuple(u.pop_mark())),
    pickle.EMPTY_TUPLE: _tuple_of(0),
    pickle.TUPLE1: _tuple_of(1),
    pickle.TUPLE2: _tuple_of(2),
    pickle.TUPLE3: _tuple_of(3),
    pickle.EMPTY_LIST: lambda u: u.push([]),
    pickle.EMPTY_DICT: lambda u: u.push({}),
    pickle.EMPTY_SET: lambda u: u.push(set()),
    pickle.FROZENSET: _frozenset,
    pickle.NONE: lambda u: u.push(None),
    pickle.NEWTRUE: lambda u: u.push(True),
    pickle.NEWFALSE: lambda u: u.push(False),
    pickle.BININT: lambda u: u.push(u.unpack("<i")),
    pickle.BININT1: lambda u: u.push(u.read(1)[0]),
    pickle.BININT2: lambda u: u.push(u.unpack("<H")),
    pickle.LONG1: _long("<B"),
    pickle.LONG4: _long("<i"),
    pickle.BINFLOAT: lambda u: u.push(u.unpack(">d")),
    pickle.BINUNICODE: _text("<I"),
    pickle.SHORT_BINUNICODE: _text("<B"),
    pickle.BINUNICODE8: _text("<Q"),
    pickle.SHORT_BINSTRING: _bytes("<B"),  # Python 2 str: PyTorch's reader keeps the bytes too
    pickle.BINBYTES: _bytes("<I"),
    pickle.SHORT_BINBYTES: _bytes("<B"),
    pickle.BINPERSID: _persid,
    pickle.BINPUT: _put("<B"),
    pickle.LONG_BINPUT: _put("<I"),
    pickle.BINGET: _get("<B"),
    pickle.LONG_BINGET: _get("<I"),
    pickle.MEMOIZE: _memoize,
}
