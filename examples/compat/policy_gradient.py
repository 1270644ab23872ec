"""Policy-gradient reinforcement learning in the style of pytorch/examples reinforcement_learning: an actor-critic
policy (a shared hidden layer, an action head and a value head), actions drawn from
``torch.distributions.Categorical``, discounted returns normalised by their mean and standard deviation, the
policy loss ``-log_prob * advantage`` plus a smooth-L1 value loss, Adam. With ``continuous=True`` the actor is a
``torch.distributions.Normal`` over a force (reparameterised log-probabilities, an entropy bonus).

The environment is made here: a cart on a line that must reach the origin (deterministic dynamics, episodes of
at most 30 steps, NumPy with a fixed seed for the start positions). The loss of each episode is returned.

    python policy_gradient.py [--episodes 6] [--continuous]
"""
import argparse
from collections import namedtuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical, Normal

SavedAction = namedtuple("SavedAction", ["log_prob", "value"])


class Cart:
    """Position and velocity; the action pushes left or right (or by a force); reward -|position| per step."""

    def __init__(self, seed):
        self.rng = np.random.RandomState(seed)

    def reset(self):
        self.state = np.array([self.rng.uniform(-1.0, 1.0), 0.0])
        self.steps = 0
        return self.state.astype(np.float32)

    def step(self, force):
        pos, vel = self.state
        vel = 0.9 * vel + 0.1 * force
        pos = pos + 0.1 * vel
        self.state = np.array([pos, vel])
        self.steps += 1
        done = abs(pos) > 2.0 or self.steps >= 30
        return self.state.astype(np.float32), -abs(pos), done


class Policy(nn.Module):
    def __init__(self, continuous):
        super().__init__()
        self.affine1 = nn.Linear(2, 64)
        self.action_head = nn.Linear(64, 1 if continuous else 2)
        self.value_head = nn.Linear(64, 1)
        self.log_std = nn.Parameter(torch.zeros(1)) if continuous else None

    def forward(self, x):
        x = F.relu(self.affine1(x))
        return self.action_head(x), self.value_head(x)


def main(episodes=6, continuous=False, gamma=0.99, seed=543):
    torch.manual_seed(seed)
    env = Cart(seed)
    model = Policy(continuous)
    optimizer = optim.Adam(model.parameters(), lr=3e-2)
    eps = np.finfo(np.float32).eps.item()
    losses = []
    for _ in range(episodes):
        state, saved, rewards, entropies = env.reset(), [], [], []
        done = False
        while not done:
            out, value = model(torch.from_numpy(state))
            if continuous:
                m = Normal(out, model.log_std.exp())
                action = m.rsample()
                force = action.item()
                entropies.append(m.entropy().sum())
            else:
                m = Categorical(logits=out)
                action = m.sample()
                force = 2.0 * action.item() - 1.0
                entropies.append(m.entropy())
            saved.append(SavedAction(m.log_prob(action).sum(), value))
            state, reward, done = env.step(force)
            rewards.append(reward)
        returns, R = [], 0.0
        for r in rewards[::-1]:
            R = r + gamma * R
            returns.insert(0, R)
        returns = torch.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + eps)
        policy_losses, value_losses = [], []
        for (log_prob, value), R in zip(saved, returns):
            advantage = R - value.item()
            policy_losses.append(-log_prob * advantage)
            value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))
        loss = (torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
                - 0.01 * torch.stack(entropies).sum())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="actor-critic (pytorch/examples reinforcement_learning)")
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--continuous", action="store_true")
    args = parser.parse_args()
    for episode, loss in enumerate(main(args.episodes, args.continuous)):
        print(f"episode {episode}: loss {loss!r}")
