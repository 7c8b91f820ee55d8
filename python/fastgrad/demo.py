"""`python -m fastgrad.demo`: the seed articles' autograd examples, run on fastgrad.

Builds the graph e = (a + b) * (a * b), back-propagates through it, and shows which tensors are
leaves and which received gradients, the way the articles explain PyTorch's computation graph.
"""
import fastgrad as torch


def main():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    w = torch.tensor([0.5, -0.5], requires_grad=True)
    b = torch.tensor([1.0], requires_grad=True)
    y = torch.matmul(x, w) + b
    print(f"linear layer: y = x @ w + b = {y.item()}  (grad_fn={y.grad_fn.name()})")

    a = torch.tensor(2.0, requires_grad=True)
    b = torch.tensor(3.0, requires_grad=True)
    c = a + b
    d = a * b
    e = c * d
    e.backward()
    print(f"e = (a + b) * (a * b) = {e.item()}")
    print(f"de/da = {a.grad.item()}, de/db = {b.grad.item()}")
    print()
    print("| tensor | is_leaf | requires_grad | grad_fn |")
    print("|---|---|---|---|")
    for name, t in [("a", a), ("b", b), ("c", c), ("d", d), ("e", e)]:
        grad_fn = t.grad_fn.name() if t.grad_fn is not None else "None"
        print(f"| {name} | {t.is_leaf} | {t.requires_grad} | {grad_fn} |")


if __name__ == "__main__":
    main()
