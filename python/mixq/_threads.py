"""Who sets the size of mixq's thread pool: the user (mixq.set_num_threads),
or, until then, PyTorch's setting when mixq runs under mixq.torch."""
from . import _mixq

_set_by_user = False


def set_num_threads(threads: int) -> None:
    """Threads used by every Linear (one persistent pool); 0 = all cores.
    Once called, mixq.torch no longer follows torch.get_num_threads()."""
    global _set_by_user
    _mixq.set_num_threads(threads)
    _set_by_user = True


def follow_torch() -> None:
    """Sizes the pool as torch.get_num_threads() unless the user chose a size."""
    if _set_by_user:
        return
    import torch

    wanted = torch.get_num_threads()
    if wanted != _mixq.num_threads():
        _mixq.set_num_threads(wanted)
