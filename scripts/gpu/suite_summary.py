#!/usr/bin/env python3
"""One line per test suite from a ctest JUnit file (ctest --output-junit).

A suite is a GoogleTest test suite (the test name up to its last '.', so
"Faults/CudaFaultTest" and "CudaExecutorTest" are each one) or, for tests
that are not GoogleTest cases, the test name itself:

    suite CudaExecutorTest                     24 passed  0 failed  0 not run   141.2 s
    ...
    total                                      95 passed  0 failed  0 not run   402.7 s

Exit status 1 when a test failed or did not run, so that a script can stop.
Usage: suite_summary.py JUNIT.xml
"""
import sys
import xml.etree.ElementTree as ET
from collections import OrderedDict


def suite_of(name: str) -> str:
    head, dot, _ = name.rpartition(".")
    return head if dot else name


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    root = ET.parse(sys.argv[1]).getroot()
    suites = OrderedDict()
    for case in root.iter("testcase"):
        name = case.get("name", "?")
        row = suites.setdefault(suite_of(name), {"passed": 0, "failed": 0, "not run": 0, "seconds": 0.0})
        row["seconds"] += float(case.get("time", "0") or 0)
        status = case.get("status", "run")
        if case.find("failure") is not None or case.find("error") is not None or status == "fail":
            row["failed"] += 1
        elif case.find("skipped") is not None or status in ("notrun", "disabled"):
            row["not run"] += 1
        else:
            row["passed"] += 1
    total = {"passed": 0, "failed": 0, "not run": 0, "seconds": 0.0}
    for name, row in suites.items():
        print(f"suite {name:<44} {row['passed']:3d} passed {row['failed']:2d} failed {row['not run']:2d} not run "
              f"{row['seconds']:7.1f} s")
        for key in total:
            total[key] += row[key]
    print(f"total {'':<44} {total['passed']:3d} passed {total['failed']:2d} failed {total['not run']:2d} not run "
          f"{total['seconds']:7.1f} s")
    return 0 if total["failed"] == 0 and total["not run"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
