"""The optimisation step of PyTorch's DQN tutorial (reinforcement_q_learning): a replay memory of
Transition named tuples, a batch taken apart with zip(*...), a boolean mask of non-final next states,
Q(s, a) gathered from the policy network, max Q of the next states from the target network under
no_grad, the Huber (SmoothL1) loss against the Bellman target, clip_grad_value_ and AdamW with
amsgrad; then the soft update of the target network through state_dicts.

A PyTorch program: a small deterministic stand-in for CartPole, initial weights from a formula so that
every library starts from the same networks, and Python's random module for the exploration and the
replay samples (the same under every library); run it on fastgrad unchanged with
`python -m fastgrad.run examples/dqn_step.py`.
"""

import math
import random
from collections import deque, namedtuple

import torch
import torch.nn as nn
import torch.optim as optim

BATCH_SIZE, GAMMA, TAU, LR = 16, 0.99, 0.005, 1e-3
EPS_START, EPS_END, EPS_DECAY = 0.9, 0.05, 50
Transition = namedtuple("Transition", ("state", "action", "next_state", "reward"))
rng = random.Random(11)


class Pole:
    """Four numbers of state, two actions; the episode ends when the angle leaves [-0.2, 0.2]."""

    def reset(self):
        self.state = [rng.uniform(-0.05, 0.05) for _ in range(4)]
        return self.state

    def step(self, action):
        x, v, angle, spin = self.state
        force = 1.0 if action == 1 else -1.0
        spin += 0.05 * (math.sin(angle) * 9.8 - force * math.cos(angle))
        angle += 0.05 * spin
        v += 0.05 * force
        x += 0.05 * v
        self.state = [x, v, angle, spin]
        return self.state, 1.0, abs(angle) > 0.2


class ReplayMemory:
    def __init__(self, capacity):
        self.memory = deque([], maxlen=capacity)

    def push(self, *args):
        self.memory.append(Transition(*args))

    def sample(self, batch_size):
        return rng.sample(self.memory, batch_size)

    def __len__(self):
        return len(self.memory)


class DQN(nn.Module):
    def __init__(self, n_observations, n_actions):
        super().__init__()
        self.layer1 = nn.Linear(n_observations, 32)
        self.layer2 = nn.Linear(32, 32)
        self.layer3 = nn.Linear(32, n_actions)

    def forward(self, x):
        x = torch.relu(self.layer1(x))
        return self.layer3(torch.relu(self.layer2(x)))


def select_action(policy_net, state, steps_done):
    eps_threshold = EPS_END + (EPS_START - EPS_END) * math.exp(-1.0 * steps_done / EPS_DECAY)
    if rng.random() > eps_threshold:
        with torch.no_grad():
            return policy_net(state).max(1).indices.view(1, 1)
    return torch.tensor([[rng.randrange(2)]], dtype=torch.long)


def optimize_model(policy_net, target_net, memory, optimizer):
    transitions = memory.sample(BATCH_SIZE)
    batch = Transition(*zip(*transitions))
    non_final_mask = torch.tensor(tuple(s is not None for s in batch.next_state), dtype=torch.bool)
    non_final_next_states = torch.cat([s for s in batch.next_state if s is not None])
    state_batch, action_batch, reward_batch = torch.cat(batch.state), torch.cat(batch.action), torch.cat(batch.reward)
    state_action_values = policy_net(state_batch).gather(1, action_batch)
    next_state_values = torch.zeros(BATCH_SIZE)
    with torch.no_grad():
        next_state_values[non_final_mask] = target_net(non_final_next_states).max(1).values
    expected_state_action_values = (next_state_values * GAMMA) + reward_batch
    loss = nn.SmoothL1Loss()(state_action_values, expected_state_action_values.unsqueeze(1))
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_value_(policy_net.parameters(), 100)
    optimizer.step()
    return loss.item()


def main():
    env = Pole()
    policy_net, target_net = DQN(4, 2), DQN(4, 2)
    with torch.no_grad():
        for i, p in enumerate(policy_net.parameters()):
            p.copy_(torch.cos(torch.arange(p.numel(), dtype=torch.float32) * 0.43 + i).view(p.shape) * 0.3)
    target_net.load_state_dict(policy_net.state_dict())
    optimizer = optim.AdamW(policy_net.parameters(), lr=LR, amsgrad=True)
    memory = ReplayMemory(1000)
    steps_done = 0
    for episode in range(6):
        state = torch.tensor(env.reset(), dtype=torch.float32).unsqueeze(0)
        losses = []
        for t in range(40):
            action = select_action(policy_net, state, steps_done)
            steps_done += 1
            observation, reward, terminated = env.step(action.item())
            reward = torch.tensor([reward])
            next_state = None if terminated else torch.tensor(observation, dtype=torch.float32).unsqueeze(0)
            memory.push(state, action, next_state, reward)
            state = next_state
            if len(memory) >= BATCH_SIZE:
                losses.append(optimize_model(policy_net, target_net, memory, optimizer))
            target_net_state_dict = target_net.state_dict()
            policy_net_state_dict = policy_net.state_dict()
            for key in policy_net_state_dict:
                target_net_state_dict[key] = policy_net_state_dict[key] * TAU + target_net_state_dict[key] * (1 - TAU)
            target_net.load_state_dict(target_net_state_dict)
            if terminated:
                break
        mean = sum(losses) / len(losses) if losses else float("nan")
        print(f"episode {episode}: {t + 1} steps, mean loss {mean:.6f}")


if __name__ == "__main__":
    main()
