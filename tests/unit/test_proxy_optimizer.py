"""The proxy's own SGD and Adam make the updates torch.optim makes (`ladder.workloads.proxy.buffers.Optimizer`)."""

from __future__ import annotations

import pytest

# torch and the proxy's modules (which import it) are imported by the tests themselves: collecting this file is then
# no `import torch` (seconds) in every worker, only in the one that runs it


@pytest.mark.parametrize("kind", ["SGD", "Adam"])
@pytest.mark.parametrize("weight_decay", [0.0, 1e-2])
def test_the_proxys_optimizer_steps_as_torch_optim_does(kind: str, weight_decay: float) -> None:
    import torch

    from ladder.workloads.proxy.agent import OptimSpec
    from ladder.workloads.proxy.buffers import Optimizer, mlp

    torch.manual_seed(0)
    ours, theirs = mlp(6, [16, 16], 3), mlp(6, [16, 16], 3)
    theirs.load_state_dict(ours.state_dict())
    start = [p.detach().clone() for p in ours.parameters()]
    lr = 1e-2
    mine = Optimizer(OptimSpec(kind, lr, weight_decay), ours.parameters())
    ref = (torch.optim.Adam if kind == "Adam" else torch.optim.SGD)(
        theirs.parameters(), lr=lr, weight_decay=weight_decay
    )
    for _ in range(5):
        x, y = torch.randn(32, 6), torch.randn(32, 3)
        for net, opt in ((ours, mine), (theirs, ref)):
            opt.zero_grad()
            torch.nn.functional.mse_loss(net(x), y).backward()
            opt.step()
    for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert all(not torch.equal(a, b) for a, b in zip(ours.parameters(), start, strict=True))  # every step moved them


def test_adams_moments_appear_at_its_first_step() -> None:
    import torch

    from ladder.workloads.proxy.agent import OptimSpec
    from ladder.workloads.proxy.buffers import Optimizer, mlp

    net = mlp(4, [8], 2)
    opt = Optimizer(OptimSpec("Adam", 1e-3, 0.0), net.parameters())
    assert opt.moments == []  # as torch.optim.Adam: no state before the first step (iteration 1's update)
    net(torch.randn(3, 4)).sum().backward()
    opt.step()
    assert [m.shape for m, _ in opt.moments] == [p.shape for p in net.parameters()]
