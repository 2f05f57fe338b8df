"""Old path of kforge.openenv.server, kept for code and configs written
against the flat package: importing it gives that module itself (same
objects, and ``kforge.openenv_server:app`` is its app), and
``python3 -m kforge.openenv_server`` runs its command line."""

import sys

from .openenv import server as _moved

if __name__ == "__main__":
    sys.exit(_moved.main())
sys.modules[__name__] = _moved
