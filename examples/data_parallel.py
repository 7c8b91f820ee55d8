"""Data-parallel SGD over 2 processes, the gradients averaged through shared memory.

Every process holds a replica of a small MLP (the same seed makes the same initial weights) and,
at each step, computes the gradient of its shard of the batch. fastgrad.nn.utils.flatten_grads_
makes the replica's gradients views of one flat buffer, here the replica's row of a shared array,
so backward writes them straight into shared memory. After a barrier every replica sums the rows
in the same order (rank 0, 1, ...) and divides by the number of replicas, so all of them get
bit-identical averages: the mean loss's gradient over the whole batch. A second barrier, and each
copies the average into its own buffer and steps its optimizer: the replicas stay bitwise equal.

With mpi4py, the averaging is one call on the same buffer (`.numpy()` shares its memory):
    comm.Allreduce(MPI.IN_PLACE, flat_grads.numpy(), op=MPI.SUM); flat_grads /= comm.size

Written against fastgrad itself, not against `torch` names for `python -m fastgrad.run`: PyTorch's
way (torch.distributed, DistributedDataParallel) has no fastgrad counterpart.

    python examples/data_parallel.py
"""

import multiprocessing

import numpy as np

import fastgrad

WORLD_SIZE = 2
STEPS = 5
BATCH = 8
SEED = 0
TIMEOUT = 120  # seconds a replica waits for the others before giving up


def make_model():
    """The replica: the same initial weights in every process."""
    fastgrad.manual_seed(SEED)
    return fastgrad.nn.Sequential(fastgrad.nn.Linear(4, 16), fastgrad.nn.Tanh(), fastgrad.nn.Linear(16, 1))


def gradient_count():
    return sum(p.numel() for p in make_model().parameters())


def make_batches(steps):
    """The same batches in every process (drawn after make_model, from its seed)."""
    inputs = fastgrad.randn(steps, BATCH, 4)
    return [(x, x.sum(-1, keepdim=True).sin()) for x in inputs]


def train(rank, world_size, steps, shared_grads, barrier):
    """Trains replica `rank` on its shard of each batch; returns its shard losses and final state_dict."""
    model = make_model()
    batches = make_batches(steps)
    optimizer = fastgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    all_grads = fastgrad.from_numpy(np.frombuffer(shared_grads, dtype=np.float32).reshape(world_size, -1))
    flat_grads = fastgrad.nn.utils.flatten_grads_(model.parameters(), all_grads[rank])
    losses = []
    for inputs, targets in batches:
        optimizer.zero_grad(set_to_none=False)  # zeroes the buffer; None would detach .grad from it
        loss = fastgrad.nn.functional.mse_loss(model(inputs.chunk(world_size)[rank]), targets.chunk(world_size)[rank])
        loss.backward()
        barrier.wait()  # every replica's gradients are in shared memory
        mean_grads = all_grads[0].clone()
        for other in all_grads[1:]:
            mean_grads += other
        mean_grads /= world_size
        barrier.wait()  # every replica has read every row: each may now overwrite its own
        flat_grads.copy_(mean_grads)
        optimizer.step()
        losses.append(loss.item())
    return losses, model.state_dict()


def _replica(rank, world_size, steps, shared_grads, barrier, results):
    try:
        results.put((rank, train(rank, world_size, steps, shared_grads, barrier)))
    except BaseException:
        barrier.abort()  # the others stop waiting for this replica
        results.put((rank, None))
        raise


def run(world_size=WORLD_SIZE, steps=STEPS):
    """Trains world_size replicas in as many processes; returns each one's (losses, state_dict)."""
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no thread pool inherited by fork
    shared_grads = context.RawArray("f", world_size * gradient_count())
    barrier = context.Barrier(world_size, timeout=TIMEOUT)
    results = context.Queue()
    replicas = [
        context.Process(target=_replica, args=(rank, world_size, steps, shared_grads, barrier, results))
        for rank in range(world_size)
    ]
    for replica in replicas:
        replica.start()
    finished = dict(results.get(timeout=TIMEOUT) for _ in replicas)
    for replica in replicas:
        replica.join()
    if any(finished[rank] is None for rank in range(world_size)):
        raise RuntimeError("a replica failed (its traceback is above)")
    return [finished[rank] for rank in range(world_size)]


def main():
    outcomes = run()
    for step, shard_losses in enumerate(zip(*(losses for losses, _ in outcomes))):
        print(f"step {step}: loss {sum(shard_losses) / len(shard_losses):.6f}")
    first = outcomes[0][1]
    equal = all(np.array_equal(first[name].numpy(), state[name].numpy()) for _, state in outcomes[1:] for name in first)
    print(f"replicas bitwise equal: {equal}")


if __name__ == "__main__":
    main()
