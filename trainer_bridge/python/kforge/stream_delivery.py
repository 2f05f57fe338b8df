"""Old path of kforge.stream.delivery, kept for code written against the flat
package: importing it gives that module itself (same objects, same state)."""

import sys

from .stream import delivery as _moved

sys.modules[__name__] = _moved
