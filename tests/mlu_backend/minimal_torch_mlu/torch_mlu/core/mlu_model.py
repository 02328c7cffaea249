"""``torch_mlu.core.mlu_model`` of the minimal package: a card that reports its core version
and core number (a real MLU290 with 4 cores, say), and the fusion switch."""
_STATE = {"core_version": "MLU290", "core_number": 4, "can_fuse": True}


def set_core_version(version):
    _STATE["core_version"] = version


def get_core_version():
    return _STATE["core_version"]


def get_core_number():
    return _STATE["core_number"]


def _jit_override_can_fuse_on_mlu(flag):
    _STATE["can_fuse"] = flag


def _jit_can_fuse_on_mlu():
    return _STATE["can_fuse"]
