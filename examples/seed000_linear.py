import fastgrad as torch
# 定义输入
x = torch.tensor([1.0, 2.0], requires_grad=True)
# 定义权重和偏置
w = torch.tensor([0.5, -0.5], requires_grad=True)
b = torch.tensor([1.0], requires_grad=True)
# 前向传播
y = torch.matmul(x, w) + b
print(f"Output: {y.item()}")
