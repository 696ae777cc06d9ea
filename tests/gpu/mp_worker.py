"""H200 scenario: a multiprocessing worker (fork start method, ends with os._exit) allocates 16 MiB
through PyTorch; the parent never touches CUDA."""
import multiprocessing as mp


def work():
    import torch
    x = torch.empty(16 << 20, dtype=torch.uint8, device="cuda")  # site: worker
    x.fill_(1)
    torch.cuda.synchronize()


if __name__ == "__main__":
    p = mp.get_context("fork").Process(target=work)
    p.start()
    p.join()
    print("worker exit", p.exitcode)
