import torch
# 定义叶子节点
a = torch.tensor(2.0, requires_grad=True)
b = torch.tensor(3.0, requires_grad=True)
# 非叶子节点
c = a + b
d = a * b
e = c * d
# 计算输出
print(f"Output e: {e.item()}")
# 反向传播
e.backward()
# 打印梯度
print(f"Gradient w.r.t a: {a.grad.item()}")
print(f"Gradient w.r.t b: {b.grad.item()}")
