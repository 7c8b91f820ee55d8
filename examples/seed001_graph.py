import fastgrad as torch


w = torch.tensor([1.],requires_grad=True) 
x = torch.tensor([2.],requires_grad=True) 

a = torch.add(x,w)
b = torch.add(w,1)
y = torch.mul(a,b)

y.backward()


print('output','\n', 'x :', x,x.shape)
print('\n', 'w :', w,w.shape)
print('\n', 'wgrad :', w.grad)

# 查看叶子节点
print('is leaf :', 'x :', x.is_leaf,'w :', w.is_leaf,'a :', a.is_leaf,'b :', b.is_leaf,'y :', y.is_leaf,)
# 查看梯度
print('grad :', 'x :', x.grad,'w :', w.grad,'a :', a.grad,'b :', b.grad,'y :', y.grad,)
