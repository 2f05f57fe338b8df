"""Old path of kforge.openenv.registry, kept for code written against the flat
package: importing it gives that module itself (same objects, same state)."""

import sys

from .openenv import registry as _moved

sys.modules[__name__] = _moved
