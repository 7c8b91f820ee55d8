"""The named tuples of ops with several results, as torch.return_types: `values, indices = r`,
r[0], r.values, made from one sequence (`topk((values, indices))`, as PyTorch's structseq), and
printed as PyTorch prints them (`fastgrad.return_types.topk(\nvalues=...`). Backend-independent:
fastgrad and fastgrad.reference return the same classes."""

import collections


def _named_tuple(name, fields):
    base = collections.namedtuple(name, fields)

    def __new__(cls, sequence):
        # tuple's own constructor: base.__new__(cls, *sequence) was a second Python call, a quarter of
        # a per-token topk's wrapper. The checks and messages are those of PyTorch's structseq.
        try:
            values = tuple(sequence)
        except TypeError:
            raise TypeError("constructor requires a sequence") from None
        if len(values) != len(fields):
            raise TypeError(f"{__name__}.{name}() takes a {len(fields)}-sequence ({len(values)}-sequence given)")
        return tuple.__new__(cls, values)

    def __reduce__(self):
        return type(self), (tuple(self),)

    def __repr__(self):
        items = ",\n".join(f"{field}={value!r}" for field, value in zip(self._fields, self))
        return f"{__name__}.{name}(\n{items})"

    namespace = {"__slots__": (), "__module__": __name__, "__new__": __new__, "__reduce__": __reduce__}
    return type(name, (base,), {**namespace, "__repr__": __repr__})


max, min, sort, topk, kthvalue, median, mode, cummax, cummin = (
    _named_tuple(name, ["values", "indices"])
    for name in ("max", "min", "sort", "topk", "kthvalue", "median", "mode", "cummax", "cummin")
)
aminmax = _named_tuple("aminmax", ["min", "max"])
histogram = _named_tuple("histogram", ["hist", "bin_edges"])

# linear algebra (fastgrad.linalg)
slogdet, linalg_slogdet = (_named_tuple(name, ["sign", "logabsdet"]) for name in ("slogdet", "linalg_slogdet"))
linalg_eigh = _named_tuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
linalg_svd = _named_tuple("linalg_svd", ["U", "S", "Vh"])
svd = _named_tuple("svd", ["U", "S", "V"])
qr, linalg_qr = (_named_tuple(name, ["Q", "R"]) for name in ("qr", "linalg_qr"))
