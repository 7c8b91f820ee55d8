"""Argument checks remembered: the checks of a convolution or pool depend only on the input's shape
and dtype and on the arguments, and a model calls each layer with the same ones every step, so the
checked (primitive) arguments are kept under those and later calls skip the checks (they were most
of a LeNet layer's Python time). A failing check raises and is not kept."""

_SCALARS = frozenset((int, bool, type(None)))
_INTS = frozenset((int,))


class CheckedArguments:
    def __init__(self, limit=256):
        self.results = {}
        self.limit = limit  # shapes seen: a model has few; past this, start over

    def get(self, key, arguments, check):
        """check()'s result, kept under `key` (shapes, dtypes) and `arguments` when each is an int,
        bool, None or tuple of ints: their types are part of the key, as True or 1.0 compare equal to
        1 but are checked differently (and a float inside a tuple is not kept at all)."""
        types = tuple(map(type, arguments))
        for argument, kind in zip(arguments, types):
            if not (kind in _SCALARS or kind is tuple and _INTS.issuperset(map(type, argument))):
                return check()
        key = (key, arguments, types)
        result = self.results.get(key)
        if result is None:
            result = check()
            if len(self.results) >= self.limit:
                self.results.clear()
            self.results[key] = result
        return result
