"""Bad input raises PyTorch's exception type with PyTorch's wording (users search for it).

Each case: a lambda over the module, the exception type and the message (matched literally; a
prefix where the rest is PyTorch-internal wording). Index errors live in test_indexing.py,
dtype-related ones in test_promotion.py.
"""

import re

import pytest


ERRORS = [  # id, fn(fg), exception, message
    # broadcasting
    (
        "broadcast add",
        lambda fg: fg.ones(2, 3) + fg.ones(2, 4),
        RuntimeError,
        "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1",
    ),
    (
        "broadcast mul 3-D",
        lambda fg: fg.ones(2, 3, 4) * fg.ones(5, 4),
        RuntimeError,
        "The size of tensor a (3) must match the size of tensor b (5) at non-singleton dimension 1",
    ),
    (
        "broadcast maximum",
        lambda fg: fg.maximum(fg.ones(3), fg.ones(2)),
        RuntimeError,
        "The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 0",
    ),
    (
        "broadcast where",
        lambda fg: fg.where(fg.ones(2, 3) > 0, fg.ones(2, 3), fg.ones(4, 3)),
        RuntimeError,
        "The size of tensor a (2) must match the size of tensor b (4) at non-singleton dimension 0",
    ),
    # matmul family
    (
        "mm",
        lambda fg: fg.mm(fg.ones(2, 3), fg.ones(4, 5)),
        RuntimeError,
        "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)",
    ),
    (
        "matmul 2-D@2-D",
        lambda fg: fg.ones(2, 3) @ fg.ones(4, 5),
        RuntimeError,
        "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)",
    ),
    (
        "matmul 1-D@2-D",
        lambda fg: fg.ones(3) @ fg.ones(4, 5),
        RuntimeError,
        "mat1 and mat2 shapes cannot be multiplied (1x3 and 4x5)",
    ),
    (
        "matmul 3-D@2-D",
        lambda fg: fg.ones(2, 2, 3) @ fg.ones(4, 5),
        RuntimeError,
        "mat1 and mat2 shapes cannot be multiplied (4x3 and 4x5)",
    ),
    (
        "matmul 2-D@1-D",
        lambda fg: fg.ones(2, 3) @ fg.ones(4),
        RuntimeError,
        "size mismatch, got input (2), mat (2x3), vec (4)",
    ),
    (
        "matmul 1-D@1-D",
        lambda fg: fg.ones(3) @ fg.ones(4),
        RuntimeError,
        "inconsistent tensor size, expected tensor [3] and src [4] to have the same number of "
        "elements, but got 3 and 4 elements respectively",
    ),
    (
        "dot",
        lambda fg: fg.dot(fg.ones(3), fg.ones(4)),
        RuntimeError,
        "inconsistent tensor size, expected tensor [3] and src [4] to have the same number of "
        "elements, but got 3 and 4 elements respectively",
    ),
    (
        "dot of a matrix",
        lambda fg: fg.dot(fg.ones(3, 3), fg.ones(3)),
        RuntimeError,
        "1D tensors expected, but got 2D and 1D tensors",
    ),
    (
        "matmul 3-D@3-D",
        lambda fg: fg.ones(2, 2, 3) @ fg.ones(2, 4, 5),
        RuntimeError,
        "Expected size for first two dimensions of batch2 tensor to be: [2, 3] but got: [2, 4].",
    ),
    (
        "matmul batch broadcast",
        lambda fg: fg.ones(2, 2, 3) @ fg.ones(3, 3, 5),
        RuntimeError,
        "The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0",
    ),
    (
        "matmul 0-d",
        lambda fg: fg.matmul(fg.ones(()), fg.ones(3)),
        RuntimeError,
        "both arguments to matmul need to be at least 1D, but they are 0D and 1D",
    ),
    ("mm of a vector", lambda fg: fg.mm(fg.ones(3), fg.ones(3, 5)), RuntimeError, "self must be a matrix"),
    # reshape / view
    ("reshape", lambda fg: fg.ones(2, 3).reshape(5), RuntimeError, "shape '[5]' is invalid for input of size 6"),
    (
        "reshape with -1",
        lambda fg: fg.ones(2, 3).reshape(-1, 4),
        RuntimeError,
        "shape '[-1, 4]' is invalid for input of size 6",
    ),
    ("reshape two -1", lambda fg: fg.ones(2, 3).reshape(-1, -1), RuntimeError, "only one dimension can be inferred"),
    ("view", lambda fg: fg.ones(2, 3).view(4, 2), RuntimeError, "shape '[4, 2]' is invalid for input of size 6"),
    (
        "view of non-contiguous",
        lambda fg: fg.ones(2, 3).t().view(6),
        RuntimeError,
        "view size is not compatible with input tensor's size and stride",
    ),
    # dimension out of range
    (
        "sum dim 2",
        lambda fg: fg.ones(2, 3).sum(2),
        IndexError,
        "Dimension out of range (expected to be in range of [-2, 1], but got 2)",
    ),
    (
        "sum dim -3",
        lambda fg: fg.ones(2, 3).sum(-3),
        IndexError,
        "Dimension out of range (expected to be in range of [-2, 1], but got -3)",
    ),
    (
        "mean dim tuple",
        lambda fg: fg.ones(2, 3).mean((0, 2)),
        IndexError,
        "Dimension out of range (expected to be in range of [-2, 1], but got 2)",
    ),
    (
        "max dim",
        lambda fg: fg.ones(2, 3).max(2),
        IndexError,
        "Dimension out of range (expected to be in range of [-2, 1], but got 2)",
    ),
    (
        "transpose",
        lambda fg: fg.ones(2, 3).transpose(0, 2),
        IndexError,
        "Dimension out of range (expected to be in range of [-2, 1], but got 2)",
    ),
    (
        "unsqueeze",
        lambda fg: fg.ones(2, 3).unsqueeze(3),
        IndexError,
        "Dimension out of range (expected to be in range of [-3, 2], but got 3)",
    ),
    (
        "squeeze",
        lambda fg: fg.ones(2, 3).squeeze(2),
        IndexError,
        "Dimension out of range (expected to be in range of [-2, 1], but got 2)",
    ),
    (
        "cat dim",
        lambda fg: fg.cat([fg.ones(2, 3), fg.ones(2, 3)], dim=2),
        IndexError,
        "Dimension out of range (expected to be in range of [-2, 1], but got 2)",
    ),
    # cat / stack / expand / permute
    (
        "cat sizes",
        lambda fg: fg.cat([fg.ones(2, 3), fg.ones(2, 4)]),
        RuntimeError,
        "Sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 for "
        "tensor number 1 in the list.",
    ),
    (
        "cat sizes dim 1",
        lambda fg: fg.cat([fg.ones(2, 3), fg.ones(3, 3)], dim=1),
        RuntimeError,
        "Sizes of tensors must match except in dimension 1. Expected size 2 but got size 3 for "
        "tensor number 1 in the list.",
    ),
    (
        "cat ranks",
        lambda fg: fg.cat([fg.ones(2, 3), fg.ones(3)]),
        RuntimeError,
        "Tensors must have same number of dimensions: got 2 and 1",
    ),
    (
        "stack",
        lambda fg: fg.stack([fg.ones(2, 3), fg.ones(2, 4)]),
        RuntimeError,
        "stack expects each tensor to be equal size, but got [2, 3] at entry 0 and [2, 4] at entry 1",
    ),
    (
        "expand",
        lambda fg: fg.ones(2, 3).expand(2, 4),
        RuntimeError,
        "The expanded size of the tensor (4) must match the existing size (3) at non-singleton "
        "dimension 1.  Target sizes: [2, 4].  Tensor sizes: [2, 3]",
    ),
    (
        "permute duplicate",
        lambda fg: fg.ones(2, 3).permute(0, 0),
        RuntimeError,
        "permute(): duplicate dims are not allowed.",
    ),
    (
        "permute length",
        lambda fg: fg.ones(2, 3).permute(0, 1, 2),
        RuntimeError,
        "number of dimensions in the tensor input does not match the length of the desired ordering "
        "of dimensions i.e. input.dim() = 2 is not equal to len(dims) = 3",
    ),
    # bool arithmetic
    (
        "bool - bool",
        lambda fg: fg.tensor([True]) - fg.tensor([False]),
        RuntimeError,
        "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
        "`logical_xor()` operator instead.",
    ),
]


@pytest.mark.parametrize("fn,exc,message", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_error(fg, fn, exc, message):
    with pytest.raises(exc, match=re.escape(message)):
        fn(fg)
