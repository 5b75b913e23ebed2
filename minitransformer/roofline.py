"""Bytes and seconds on named hardware, where the API finds them: `from minitransformer.roofline import roofline`.

The verb lives in verbs/roofline.py (and the machines in verbs/hardware.py); this module only names them at the top
of the package, as the public API.
"""

from .verbs.hardware import MACHINES, Machine, machine, probe_this_cpu
from .verbs.roofline import Roofline, phase_time, roofline

__all__ = ["MACHINES", "Machine", "Roofline", "machine", "phase_time", "probe_this_cpu", "roofline"]
