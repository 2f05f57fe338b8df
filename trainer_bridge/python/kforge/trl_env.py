"""Old path of kforge.trainers.trl, kept for configs that name
``kforge.trl_env.KForgeToolEnv``: importing it gives that module itself, so
the class is the same object."""

import sys

from .trainers import trl as _moved

sys.modules[__name__] = _moved
