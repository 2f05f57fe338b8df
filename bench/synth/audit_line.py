"""What the set audits (audit_shortcuts.py, audit_contamination.py) print and
write: one JSON line on stdout and, with --write, the same under the set's
folder, replaced whole so that the dataset card never reads half a file."""

import json
import os


def emit(summary, out_dir, file_name, write):
    print(json.dumps(summary))
    if write:
        path = os.path.join(out_dir, file_name)
        with open(path + ".tmp", "w") as f:
            json.dump(summary, f, indent=1)
        os.replace(path + ".tmp", path)
