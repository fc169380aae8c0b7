"""Puts every group folder of the workers on `sys.path`, so that a worker imports a sibling by its
name (`from timing import time_calls`) wherever the folder lies: sandbox/workers on the host,
/opt/kernel-agent/workers in the image. The workers run as scripts with no package above them, so
their imports cannot be relative, and a group's scripts import modules of other groups.

Every worker script imports it first, after putting this folder on the path (a test that imports
workers may import it as `sandbox.workers.siblings` instead):

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import siblings  # noqa: E402,F401
"""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
GROUPS = ("build", "referee", "gpu", "tune", "tasks")
GROUP_DIRS = tuple(os.path.join(ROOT, group) for group in GROUPS)

# The groups come first: `import build` is the build worker, not the group folder that holds it.
for _folder in reversed((*GROUP_DIRS, ROOT)):  # protocol/ and this module sit in ROOT
    if _folder not in sys.path:
        sys.path.insert(0, _folder)
