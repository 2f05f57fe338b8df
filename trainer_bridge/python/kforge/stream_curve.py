"""Old path of kforge.stream.curve, kept for code written against the flat
package: importing it gives that module itself (same objects, same state)."""

import sys

from .stream import curve as _moved

sys.modules[__name__] = _moved
