"""Who sets the size of mixq's thread pool: the user (mixq.set_num_threads),
or, until then, PyTorch's setting when mixq runs under mixq.torch."""
import warnings

from . import _mixq

_set_by_user = False
_followed = None  # torch's thread count the pool was last sized for


def set_num_threads(threads: int) -> None:
    """Threads used by every Linear (one persistent pool); 0 = all cores.
    Once called, mixq.torch no longer follows torch.get_num_threads()."""
    global _set_by_user
    _mixq.set_num_threads(threads)
    _set_by_user = True


def follow_torch(get_num_threads) -> None:
    """Sizes the pool as torch's get_num_threads() (passed in: this module
    imports without torch) unless the user chose a size."""
    if _set_by_user:
        return
    global _followed
    wanted = get_num_threads()
    if wanted == _followed:
        return
    _followed = wanted
    if wanted != _mixq.num_threads():
        try:
            _mixq.set_num_threads(wanted)
        except _mixq.Error as e:  # the system refused threads: run on those that started
            warnings.warn(str(e), RuntimeWarning)
