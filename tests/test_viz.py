"""fastgrad.viz: Mermaid/DOT text of the autograd graph, the leaf table and render(), on every backend.

viz is imported from fastgrad and applied to `fg` tensors: it reads any backend's graph through the
public API (it also runs with FASTGRAD_TEST_BACKENDS=torch).
"""

import shutil
import sys
import types

import pytest

from fastgrad import viz

SEED_MERMAID = """\
graph TD
    n0["MulBackward0"]
    n1["AddBackward0"]
    n2["MulBackward0"]
    n3(["a"]):::leaf
    n4(["b"]):::leaf
    n1 --> n0
    n2 --> n0
    n3 --> n1
    n4 --> n1
    n3 --> n2
    n4 --> n2
    classDef leaf fill:#dbeafe,stroke:#1d4ed8"""

SEED_DOT_ALL_NAMED = """\
digraph autograd {
    node [shape=box, fontname="Helvetica"];
    n0 [label="e = MulBackward0"];
    n1 [label="c = AddBackward0"];
    n2 [label="d = MulBackward0"];
    n3 [label="a", style="rounded,filled", fillcolor="#dbeafe"];
    n4 [label="b", style="rounded,filled", fillcolor="#dbeafe"];
    n1 -> n0;
    n2 -> n0;
    n3 -> n1;
    n4 -> n1;
    n3 -> n2;
    n4 -> n2;
}"""


def seed_graph(fg):
    """The seed article's e = (a + b) * (a * b)."""
    a = fg.tensor(2.0, requires_grad=True)
    b = fg.tensor(3.0, requires_grad=True)
    c = a + b
    d = a * b
    e = c * d
    return dict(a=a, b=b, c=c, d=d, e=e)


def test_seed_mermaid(fg):
    t = seed_graph(fg)
    assert viz.to_mermaid(t["e"], names={"a": t["a"], "b": t["b"]}) == SEED_MERMAID


def test_named_non_leaves_label_their_op(fg):
    t = seed_graph(fg)
    text = viz.to_mermaid(t["e"], names=t)
    assert text.splitlines()[1:4] == [
        '    n0["e = MulBackward0"]',
        '    n1["c = AddBackward0"]',
        '    n2["d = MulBackward0"]',
    ]
    assert viz.to_dot(t["e"], names=t) == SEED_DOT_ALL_NAMED


def test_seed_leaf_table(fg):
    t = seed_graph(fg)
    table = viz.leaf_table(t["e"], names=t)
    assert [tuple(row) for row in table.rows] == [
        ("a", True, True, True, None),
        ("b", True, True, True, None),
        ("c", False, True, False, "AddBackward0"),
        ("d", False, True, False, "MulBackward0"),
        ("e", False, True, False, "MulBackward0"),
    ]
    assert (
        str(table)
        == """\
| tensor | is_leaf | requires_grad | gets .grad | grad_fn      |
|--------|---------|---------------|------------|--------------|
| a      | True    | True          | True       | None         |
| b      | True    | True          | True       | None         |
| c      | False   | True          | False      | AddBackward0 |
| d      | False   | True          | False      | MulBackward0 |
| e      | False   | True          | False      | MulBackward0 |"""
    )
    assert repr(table) == str(table) == table._repr_markdown_()


@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")  # y.grad, on purpose
def test_leaf_table_tells_which_grads_backward_fills(fg):
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    const = fg.tensor([3.0, 4.0])
    h = x * const
    h.retain_grad()
    y = (h + 1).sum()
    table = viz.leaf_table(y, names={"x": x, "const": const, "h": h, "y": y})
    assert [row.gets_grad for row in table.rows] == [True, False, True, False]
    y.backward()
    assert [t.grad is not None for t in (x, const, h, y)] == [row.gets_grad for row in table.rows]


def test_leaf_table_lists_unnamed_outputs_and_leaves(fg):
    w = fg.ones(2, 3, dtype=fg.float64, requires_grad=True)
    s = fg.tensor(2.0, requires_grad=True)
    y = (w * s).sum()
    table = viz.leaf_table(y, names={"s": s})
    assert [row.name for row in table.rows] == ["s", "output", "(2, 3) float64"]
    assert [row.name for row in viz.leaf_table(y, y * 2).rows][:2] == ["output 0", "output 1"]


def test_unnamed_leaves_show_shape_and_dtype(fg):
    w = fg.ones(2, 3, dtype=fg.float64, requires_grad=True)
    s = fg.tensor(2.0, requires_grad=True)
    text = viz.to_mermaid(w * s)
    assert '    n1(["(2, 3) float64"]):::leaf' in text
    assert '    n2(["() float32"]):::leaf' in text


def test_inputs_without_grad_are_not_drawn(fg):
    a = fg.tensor([1.0, 2.0], requires_grad=True)
    y = (a * fg.tensor([3.0, 4.0])).exp()
    assert viz.to_mermaid(y, names={"a": a}).splitlines()[1:6] == [
        '    n0["ExpBackward0"]',
        '    n1["MulBackward0"]',
        '    n2(["a"]):::leaf',
        "    n1 --> n0",
        "    n2 --> n1",
    ]


def test_an_input_used_twice_is_one_edge_with_its_count(fg):
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    assert '    n1 -->|"x2"| n0' in viz.to_mermaid(y)
    assert '    n1 -> n0 [label="x2"];' in viz.to_dot(y)


def test_multiple_outputs_share_their_subgraph(fg):
    a = fg.tensor(2.0, requires_grad=True)
    b = fg.tensor(3.0, requires_grad=True)
    h = a * b
    y1 = h * 2
    y2 = h + a
    assert (
        viz.to_mermaid(y1, y2, names={"a": a, "b": b, "h": h})
        == """\
graph TD
    n0["MulBackward0"]
    n1["AddBackward0"]
    n2["h = MulBackward0"]
    n3(["a"]):::leaf
    n4(["b"]):::leaf
    n2 --> n0
    n2 --> n1
    n3 --> n1
    n3 --> n2
    n4 --> n2
    classDef leaf fill:#dbeafe,stroke:#1d4ed8"""
    )


def test_output_without_grad_fn_is_a_lone_leaf(fg):
    a = fg.tensor(2.0, requires_grad=True)
    with fg.no_grad():
        y = a * 3
    assert y.grad_fn is None
    assert (
        viz.to_mermaid(y, names={"y": y})
        == """\
graph TD
    n0(["y"]):::leaf
    classDef leaf fill:#dbeafe,stroke:#1d4ed8"""
    )
    assert (
        viz.to_dot(a)
        == """\
digraph autograd {
    node [shape=box, fontname="Helvetica"];
    n0 [label="() float32", style="rounded,filled", fillcolor="#dbeafe"];
}"""
    )
    assert [tuple(row) for row in viz.leaf_table(y).rows] == [("output", True, False, False, None)]


def test_deep_chain_is_walked_without_recursion(fg):
    x = fg.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y * 1.0
    lines = viz.to_mermaid(y, names={"x": x}).splitlines()
    assert len(lines) == 1 + 10_001 + 10_000 + 1
    assert lines[10_001] == '    n10000(["x"]):::leaf'
    assert lines[-2] == "    n10000 --> n9999"
    assert viz.to_dot(y).count(" -> ") == 10_000
    assert len(viz.leaf_table(y, names={"x": x}).rows) == 2


def test_labels_are_escaped(fg):
    x = fg.tensor(1.0, requires_grad=True)
    name = 'say "hi" #1 <b>&\\\nnext'
    y = x * 2
    assert '    n1(["say #34;hi#34; #35;1 #60;b#62;#38;\\<br>next"]):::leaf' in viz.to_mermaid(y, names={name: x})
    assert '    n1 [label="say \\"hi\\" #1 <b>&\\\\\\nnext", style' in viz.to_dot(y, names={name: x})


def test_bad_arguments(fg):
    x = fg.tensor(1.0, requires_grad=True)
    with pytest.raises(TypeError, match="at least one output"):
        viz.to_mermaid()
    with pytest.raises(TypeError, match="output 0 must be a tensor, got list"):
        viz.to_dot([x])
    with pytest.raises(TypeError, match="names must be a dict"):
        viz.leaf_table(x, names=[x])
    with pytest.raises(TypeError, match=r"names\['x'\] must be a tensor, got float"):
        viz.to_mermaid(x, names={"x": 1.0})


def test_render_without_the_graphviz_package(fg, monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)  # makes `import graphviz` raise ImportError
    with pytest.raises(ImportError, match="pip install graphviz"):
        viz.render(fg.tensor(1.0), path="never.png")


def test_render_without_the_dot_program(fg, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "graphviz", types.ModuleType("graphviz"))
    monkeypatch.setattr(shutil, "which", lambda program: None)
    with pytest.raises(RuntimeError, match="'dot' program.*install Graphviz"):
        viz.render(fg.tensor(1.0), path=tmp_path / "never.png")
    assert not (tmp_path / "never.png").exists()


def test_render_writes_the_picture(fg, tmp_path):
    pytest.importorskip("graphviz")
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot program is not installed")
    t = seed_graph(fg)
    assert viz.render(t["e"], names=t, path=tmp_path / "seed.png") == tmp_path / "seed.png"
    assert (tmp_path / "seed.png").read_bytes().startswith(b"\x89PNG")
    viz.render(t["e"], names=t, path=tmp_path / "seed.svg")
    svg = (tmp_path / "seed.svg").read_text()
    assert "<svg" in svg and "c = AddBackward0" in svg


def test_reference_viz_is_fastgrad_viz():
    import fastgrad.reference.viz

    assert fastgrad.reference.viz.to_mermaid is viz.to_mermaid is fastgrad.viz.to_mermaid


def test_same_text_as_for_pytorch_tensors(fg, torch):
    def graph(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        w = lib.tensor([0.5, -0.5], requires_grad=True)
        b = lib.tensor([1.0], requires_grad=True)
        y = lib.matmul(x, w) + b
        h = lib.relu(lib.ones(2, 3, dtype=lib.float64, requires_grad=True)).sum(1).mean()
        names = {"x": x, "w": w, "b": b, "y": y}
        return viz.to_mermaid(y, h, names=names), viz.to_dot(y, h, names=names), viz.leaf_table(y, h, names=names).rows

    assert graph(fg) == graph(torch)
    t = seed_graph(torch)
    assert viz.to_mermaid(t["e"], names={"a": t["a"], "b": t["b"]}) == SEED_MERMAID
