"""Runs documentation code blocks for ``test_doc_snippets.py``, in one process (one Spark JVM for all).

Usage: ``python doc_snippets_proc.py PLAN.json``; PLAN is a list of ``{"where", "page", "info", "text"}``
in page order. Python blocks of one page share a namespace (a page reads as one program); ``sh``
blocks run with bash. Each block that ran prints ``RAN <where>``; the first failure prints its
traceback and exits 1.
"""

from __future__ import annotations

import json
import subprocess
import sys
import traceback
from typing import Any, Dict


def main(plan_path: str) -> int:
    with open(plan_path) as f:
        plan = json.load(f)
    namespaces: Dict[str, Dict[str, Any]] = {}
    for block in plan:
        where = block["where"]
        print(f"RUN {where}", flush=True)
        try:
            if block["info"] == "python":
                ns = namespaces.setdefault(block["page"], {"__name__": "__main__"})
                exec(compile(block["text"], where, "exec"), ns)  # noqa: S102 - the documentation's code
            else:
                done = subprocess.run(["bash", "-euo", "pipefail", "-c", block["text"]], capture_output=True,
                                      text=True, timeout=300)
                sys.stdout.write(done.stdout)
                if done.returncode != 0:
                    raise RuntimeError(f"exit {done.returncode}: {done.stderr[-3000:]}")
        except BaseException:  # noqa: BLE001 - any failure of the documentation code ends the run, reported
            print(f"FAILED {where}", flush=True)
            traceback.print_exc()
            return 1
        print(f"RAN {where}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
