"""Old path of kforge.stream.protocol, kept for code written against the flat
package: importing it gives that module itself (same objects, same state)."""

import sys

from .stream import protocol as _moved

sys.modules[__name__] = _moved
