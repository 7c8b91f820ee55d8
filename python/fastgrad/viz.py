"""Seeing the autograd graph: Mermaid and Graphviz DOT text, a picture, and a table of leaves.

    import fastgrad as torch
    from fastgrad import viz
    a = torch.tensor(2.0, requires_grad=True)
    b = torch.tensor(3.0, requires_grad=True)
    c = a + b
    d = a * b
    e = c * d
    print(viz.to_mermaid(e, names={'a': a, 'b': b, 'c': c}))
    print(viz.leaf_table(e, names={'a': a, 'b': b, 'c': c, 'd': d, 'e': e}))

The graph is read through the public autograd API only (grad_fn.name(), grad_fn.next_functions,
AccumulateGrad's .variable, tensor flags), so it works the same on fastgrad, fastgrad.reference and
PyTorch tensors.

What is drawn: one node per op (its grad_fn name) and one per leaf that gradients reach (its name,
or its shape and dtype), with edges in data-flow direction, input -> op. A tensor named in `names`
labels the node that produced it ("c = AddBackward0"). An input that does not require grad has no
edge in the graph, so it is not drawn; an output without grad_fn is drawn as a lone leaf. Nodes are
numbered n0, n1, ... in breadth-first order from the outputs, and an input used k times by one op
(as in a * a) is one edge labelled "xk", so equal graphs give equal text.
"""

import collections
import collections.abc
import pathlib
import shutil

__all__ = ["to_mermaid", "to_dot", "render", "leaf_table", "LeafTable", "LeafTableRow"]

_Node = collections.namedtuple("_Node", "obj label is_leaf")  # obj: the grad_fn, or the leaf tensor
_Graph = collections.namedtuple("_Graph", "nodes edges")  # edges: {(source index, target index): count}


def _is_tensor(value):
    return hasattr(value, "grad_fn") and hasattr(value, "is_leaf")


def _check_outputs(outputs, caller):
    if not outputs:
        raise TypeError(f"{caller}() expected at least one output tensor")
    for i, out in enumerate(outputs):
        if not _is_tensor(out):
            raise TypeError(f"{caller}(): output {i} must be a tensor, got {type(out).__name__}")


def _check_names(names, caller):
    if names is None:
        return {}
    if not isinstance(names, collections.abc.Mapping):
        raise TypeError(f"{caller}(): names must be a dict of name -> tensor, got {type(names).__name__}")
    for name, value in names.items():
        if not _is_tensor(value):
            raise TypeError(f"{caller}(): names[{name!r}] must be a tensor, got {type(value).__name__}")
    return names


def _op_name(fn):
    # PyTorch's C++-only nodes carry their namespace ("torch::autograd::CopySlices").
    return fn.name().rsplit("::", 1)[-1]


def _is_accumulate_grad(fn):
    return hasattr(fn, "variable")  # the node that adds gradients into the leaf `variable`


def _describe(tensor):
    """The label of an unnamed leaf: its shape and dtype, e.g. "(2, 3) float32"."""
    return f"{tuple(tensor.shape)} {str(tensor.dtype).rsplit('.', 1)[-1]}"


def _walk(outputs, names):
    """The graph behind `outputs`, walked breadth-first without recursion, each node once.

    Ops are identified by their grad_fn object and leaves by their tensor. The graph holds every one
    of them (and `named` the named tensors' grad_fn objects) while the walk runs, so that an id() is
    never reused and fastgrad hands back the same grad_fn object for the same node.
    """
    named = [(name, tensor, tensor.grad_fn) for name, tensor in names.items()]  # holds the grad_fn objects
    names_of = collections.defaultdict(list)  # id(grad_fn or leaf tensor) -> names given to it
    for name, tensor, fn in named:
        names_of[id(tensor if fn is None else fn)].append(str(name))

    index, nodes, edges = {}, [], {}
    pending = collections.deque()  # indices of ops whose inputs are still to be visited

    def visit(obj, is_leaf):
        i = index.get(id(obj))
        if i is None:
            i = index[id(obj)] = len(nodes)
            given = ", ".join(names_of.get(id(obj), ()))
            if is_leaf:
                label = given or _describe(obj)
            else:
                label = f"{given} = {_op_name(obj)}" if given else _op_name(obj)
                pending.append(i)
            nodes.append(_Node(obj, label, is_leaf))
        return i

    for out in outputs:
        fn = out.grad_fn
        if fn is None:
            visit(out, True)
        else:
            visit(fn, False)
    while pending:
        target = pending.popleft()
        for fn, _ in nodes[target].obj.next_functions:
            if fn is None:  # an input that does not require grad
                continue
            source = visit(fn.variable, True) if _is_accumulate_grad(fn) else visit(fn, False)
            edges[source, target] = edges.get((source, target), 0) + 1
    return _Graph(nodes, edges)


def _mermaid_text(label):
    # Inside a quoted Mermaid label, '"' ends the label and '#' starts an entity code, so these
    # (and the HTML specials, as labels are drawn as HTML) are written as #code; entities.
    return "".join(f"#{ord(ch)};" if ch in '#"<>&' else ch for ch in label).replace("\n", "<br>")


def _dot_text(label):
    return label.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def to_mermaid(*outputs, names=None):
    """Mermaid `graph` text of the autograd graph behind `outputs` (see the module docstring).

    names: {'a': a, ...} labels leaves and the op nodes that produced non-leaf tensors. Leaves are
    drawn as rounded boxes of class "leaf"; an input used k times by one op has an edge labelled "xk".
    """
    _check_outputs(outputs, "to_mermaid")
    graph = _walk(outputs, _check_names(names, "to_mermaid"))
    lines = ["graph TD"]
    for i, node in enumerate(graph.nodes):
        label = _mermaid_text(node.label)
        lines.append(f'    n{i}(["{label}"]):::leaf' if node.is_leaf else f'    n{i}["{label}"]')
    for (source, target), count in graph.edges.items():
        arrow = "-->" if count == 1 else f'-->|"x{count}"|'
        lines.append(f"    n{source} {arrow} n{target}")
    lines.append("    classDef leaf fill:#dbeafe,stroke:#1d4ed8")
    return "\n".join(lines)


def to_dot(*outputs, names=None):
    """Graphviz DOT text of the autograd graph behind `outputs`: the same nodes, labels and edges as
    to_mermaid; leaves are filled rounded boxes."""
    _check_outputs(outputs, "to_dot")
    graph = _walk(outputs, _check_names(names, "to_dot"))
    lines = ["digraph autograd {", '    node [shape=box, fontname="Helvetica"];']
    for i, node in enumerate(graph.nodes):
        style = ', style="rounded,filled", fillcolor="#dbeafe"' if node.is_leaf else ""
        lines.append(f'    n{i} [label="{_dot_text(node.label)}"{style}];')
    for (source, target), count in graph.edges.items():
        multiplicity = "" if count == 1 else f' [label="x{count}"]'
        lines.append(f"    n{source} -> n{target}{multiplicity};")
    lines.append("}")
    return "\n".join(lines)


def render(*outputs, names=None, path="graph.png"):
    """Draw the graph of to_dot into `path` (the format follows its suffix: .png, .svg, .pdf, ...;
    png without one) and return `path`. Needs the graphviz Python package and Graphviz's `dot` program."""
    try:
        import graphviz
    except ImportError:
        raise ImportError("fastgrad.viz.render() needs the graphviz Python package: pip install graphviz") from None
    if shutil.which("dot") is None:
        raise RuntimeError(
            "fastgrad.viz.render() needs Graphviz's 'dot' program on the PATH: install Graphviz "
            "(apt-get install graphviz, brew install graphviz, or https://graphviz.org/download/)"
        )
    text = to_dot(*outputs, names=names)
    picture = graphviz.Source(text).pipe(format=pathlib.PurePath(path).suffix[1:].lower() or "png")
    with open(path, "wb") as f:
        f.write(picture)
    return path


LeafTableRow = collections.namedtuple("LeafTableRow", "name is_leaf requires_grad gets_grad grad_fn")
LeafTableRow.__doc__ = """One tensor of a leaf table. gets_grad: backward() fills its .grad (a leaf that requires
grad, or a tensor that called retain_grad()); grad_fn: the node name, or None."""


class LeafTable:
    """The rows of leaf_table(): `.rows` is a list of LeafTableRow; str() and repr() are a markdown table.

    The table is returned, not printed: the REPL and notebooks show it (repr, _repr_markdown_), and a
    script prints it once with print(leaf_table(...)).
    """

    HEADER = ("tensor", "is_leaf", "requires_grad", "gets .grad", "grad_fn")

    def __init__(self, rows):
        self.rows = rows

    def __str__(self):
        cells = [self.HEADER] + [tuple(str(value) for value in row) for row in self.rows]
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.HEADER))]
        lines = ["| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths)) + " |" for row in cells]
        lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_markdown_(self):
        return str(self)


def leaf_table(*outputs, names=None):
    """Which tensors are leaves, require grad and will have .grad filled by backward(), and their grad_fn.

    Rows: the tensors in `names` in their order, then unnamed outputs ("output", or "output 0",
    "output 1", ...), then the unnamed leaves that gradients of `outputs` reach (labelled by shape and
    dtype, as in to_mermaid). Returns a LeafTable (see its docstring for printing).
    """
    _check_outputs(outputs, "leaf_table")
    names = _check_names(names, "leaf_table")
    tensors = list(names.items())
    tensors += [("output" if len(outputs) == 1 else f"output {i}", out) for i, out in enumerate(outputs)]
    tensors += [(node.label, node.obj) for node in _walk(outputs, {}).nodes if node.is_leaf]
    rows, seen = [], set()
    for name, t in tensors:
        if id(t) not in seen:
            seen.add(id(t))
            fn = t.grad_fn
            gets_grad = (t.is_leaf and t.requires_grad) or t.retains_grad
            fn_name = None if fn is None else _op_name(fn)
            rows.append(LeafTableRow(str(name), t.is_leaf, t.requires_grad, gets_grad, fn_name))
    return LeafTable(rows)
