"""Old path of kforge.trainers.verl, kept for verl configs whose ``_target_``
is ``kforge.verl_agent_loop.KForgeAgentLoop``: importing it gives that module
itself, so the class is the same object and is registered once."""

import sys

from .trainers import verl as _moved

sys.modules[__name__] = _moved
