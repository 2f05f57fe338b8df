#!/usr/bin/env python3
"""The house rules that need no compiler (docs/contributing.md).

    check_sources.py [--root DIR] [FILE...]

Checks the tracked files of the repository (`git ls-files`), or the files given:
  - every .cpp, .h, .cu, .py, .sh file has at most MAX_FILE_LINES lines;
  - every Python function (trainer_bridge, data_synth/python, scripts, bench) has a body of at
    most MAX_FUNCTION_LINES lines, unless its `def` line carries `# lint: long-function` with a
    reason after it;
  - every C++ function of the modules (core, reward, data_synth, env, rollout, cli) has a body
    of at most MAX_FUNCTION_LINES lines as clang-tidy's readability-function-size counts them
    (cxx_functions.py), unless its signature carries NOLINT(readability-function-size) and why;
  - no C++ namespace is named `detail` or `*_detail`: private parts are `internal`.
Prints one line per finding (`path:line: rule: what`) and exits 1 if there is any, 0 otherwise.
Stdlib only; reads each file once, so it takes well under a second on the whole tree.
"""
import argparse
import ast
import pathlib
import re
import subprocess
import sys

import cxx_functions

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
CODE_SUFFIXES = {".cpp", ".h", ".cu", ".py", ".sh"}
# Python that is ours and held to the function size. Tests are scenarios and are not.
PYTHON_FUNCTION_ROOTS = ("trainer_bridge/", "data_synth/python/", "scripts/", "bench/")
CXX_FUNCTION_ROOTS = ("core/", "reward/", "data_synth/", "env/", "rollout/", "cli/")
# The torch C++ API that torch_ext candidates compile against (docs/torch-ext.md):
# its names are PyTorch's, `detail` included.
API_SHIMS = ("env/torch_ext_shim/",)
# Inputs, not our code: candidate solutions (bundled examples, test data, the
# exploit and honest corpora) and fuzz corpora.
NOT_OURS = ("examples/", "tests/adversarial/", "tests/honest/", "fuzz/")
LONG_FUNCTION_MARK = re.compile(r"#\s*lint:\s*long-function\s*\S")
PRIVATE_NAMESPACE = re.compile(r"^\s*namespace\s+(?:[A-Za-z_][A-Za-z0-9_]*::)*([A-Za-z_]*detail)\s*\{", re.M)


def tracked_files(root):
    out = subprocess.run(["git", "ls-files"], cwd=root, check=True, capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line]


def check_file_size(rel, text):
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    if lines > MAX_FILE_LINES:
        return [f"{rel}:1: file-size: {lines} lines, over {MAX_FILE_LINES}: split it by concept"]
    return []


def check_python_functions(rel, text):
    try:
        tree = ast.parse(text, filename=rel)
    except SyntaxError as e:
        return [f"{rel}:{e.lineno or 1}: python: does not parse: {e.msg}"]
    source_lines = text.splitlines()
    findings = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body_first = node.body[0].lineno
        length = node.end_lineno - body_first + 1
        if length <= MAX_FUNCTION_LINES:
            continue
        def_line = source_lines[node.lineno - 1] if node.lineno - 1 < len(source_lines) else ""
        if LONG_FUNCTION_MARK.search(def_line):
            continue
        findings.append(f"{rel}:{node.lineno}: function-size: `{node.name}` has a body of {length} lines, "
                        f"over {MAX_FUNCTION_LINES}: split it into named phases "
                        f"(or mark the def line `# lint: long-function <why>`)")
    return findings


def check_cxx_functions(rel, text):
    findings = []
    for fn in cxx_functions.functions(text):
        if fn.lines > MAX_FUNCTION_LINES and not fn.waived:
            findings.append(f"{rel}:{fn.line}: function-size: `{fn.name}` has a body of {fn.lines} lines, "
                            f"over {MAX_FUNCTION_LINES}: split it into named phases "
                            f"(or say why not: NOLINT(readability-function-size) on its signature)")
    return findings


def check_namespaces(rel, text):
    findings = []
    for m in PRIVATE_NAMESPACE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        findings.append(f"{rel}:{line}: namespace: `{m.group(1)}`: private parts live in `internal`")
    return findings


def check(root, files):
    findings = []
    for rel in files:
        path = root / rel
        if path.suffix not in CODE_SUFFIXES or not path.is_file() or rel.startswith(NOT_OURS):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        findings += check_file_size(rel, text)
        if path.suffix == ".py" and rel.startswith(PYTHON_FUNCTION_ROOTS):
            findings += check_python_functions(rel, text)
        if path.suffix in (".cpp", ".h", ".cu"):
            if not rel.startswith(API_SHIMS):
                findings += check_namespaces(rel, text)
            if rel.startswith(CXX_FUNCTION_ROOTS):
                findings += check_cxx_functions(rel, text)
    return findings


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=None, help="the repository (default: the one this script is in)")
    parser.add_argument("files", nargs="*", help="files relative to the root (default: every tracked file)")
    args = parser.parse_args()
    root = pathlib.Path(args.root or pathlib.Path(__file__).resolve().parents[2])
    findings = check(root, args.files or tracked_files(root))
    for f in findings:
        print(f)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
