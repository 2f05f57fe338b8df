"""Function bodies of C++ files, measured without a compiler (docs/contributing.md).

The size rule needs only where each function body opens and closes. clang-tidy's
readability-function-size finds that from the AST, which costs a full parse of every
translation unit (11.3 CPU-minutes for the tree's 254 source units,
measured on the 2-core dev machine). This scanner reads the text instead (~1 s for the tree):
comments, string and character literals and preprocessor lines are blanked, then braces are
matched and each `{` at namespace or class scope is classified by the text before it.

A body's size is counted as clang-tidy counts it: the line of its `}` minus the line of its `{`.
`scripts/lint/lint.sh --tidy` runs clang-tidy itself; tests/lint runs both on a fixture of the
constructs that could fool a text reader and requires the same functions with the same sizes.
What the scanner does not see: functions made by macros, and bodies split by `#if` branches that
each open a brace (none in this tree).
"""
import re
from dataclasses import dataclass

NOLINT_SIZE = re.compile(r"NOLINT(?:NEXTLINE)?\(readability-function-size\)")
_RAW_STRING = re.compile(r'R"([^()\\ ]{0,16})\(')
_CTOR_INIT = re.compile(r"\)\s*(?:noexcept\s*)?:(?!:)")
_CLASS_HEAD = re.compile(r"\b(class|struct|union|enum)\b[^()]*$", re.S)
_NAME = re.compile(r"(~?[A-Za-z_][A-Za-z0-9_]*(?:::~?[A-Za-z_][A-Za-z0-9_]*)*|operator\s*[^\s(]+)\s*\(", re.S)


@dataclass
class Function:
    name: str
    line: int        # where its signature starts (1-based)
    body_open: int   # line of the body's `{`
    body_close: int  # line of the body's `}`
    waived: bool     # NOLINT(readability-function-size) on its signature's lines

    @property
    def lines(self):
        return self.body_close - self.body_open


def blank_non_code(text):
    """Comments, literals and preprocessor lines become spaces; newlines are kept."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":
            j = i
            while j < n and text[j] != "\n":
                j += 2 if text[j] == "\\" and j + 1 < n and text[j + 1] == "\n" else 1
            out.append(_blank(text[i:j]))
            i = j
            continue
        line_start = c == "\n"
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(_blank(text[i:j]))
            i = j
        elif c == "R" and _RAW_STRING.match(text, i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = _RAW_STRING.match(text, i)
            end = text.find(")" + m.group(1) + '"', m.end())
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + _blank(text[i + 2:j]))
            i = j
        elif c in "\"'" and not (c == "'" and i > 0 and text[i - 1].isalnum()):  # 1'000 is a digit separator
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + _blank(text[i + 1:j - 1]) + c if j - i >= 2 else _blank(text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _blank(s):
    return "".join("\n" if ch == "\n" else " " for ch in s)


def _top_level_equals(head):
    depth = 0
    for k, ch in enumerate(head):
        if ch in "([<":
            depth += 1
        elif ch in ")]>":
            depth = max(0, depth - 1)
        elif ch == "=" and depth == 0:
            prev = head[k - 1] if k else ""
            nxt = head[k + 1] if k + 1 < len(head) else ""
            if prev not in "=!<>" and nxt != "=" and "operator" not in head[max(0, k - 12):k]:
                return True
    return False


def _classify(head):
    """What a `{` at namespace or class scope opens, from the text since the last ; { or }."""
    h = head.strip()
    if re.search(r"\bnamespace\b", h) or re.fullmatch(r'extern\s*"\s*"', h):
        return "scope"
    if _CLASS_HEAD.search(h) and not h.endswith(")"):
        return "scope"
    if _top_level_equals(h):
        return "data"
    if ")" in h:
        return "function"
    return "data"


def functions(text):
    """Every function body at namespace or class scope, in order."""
    code = blank_non_code(text)
    raw_lines = text.splitlines()
    found = []
    stack = []  # (kind, line of `{`, head) per open brace
    head_start = 0
    line = 1
    for pos, ch in enumerate(code):
        if ch == "\n":
            line += 1
            continue
        if ch == ";" and (not stack or stack[-1][0] == "scope"):
            head_start = pos + 1
        elif ch == "{":
            if stack and stack[-1][0] not in ("scope",):
                stack.append(("block", line, ""))
                continue
            head = code[head_start:pos]
            kind = _classify(head)
            if kind == "function" and _CTOR_INIT.search(head) and re.search(r"[A-Za-z0-9_>]\s*$", head):
                kind = "member_init"  # `b_{x}` inside a constructor's initializer list
            stack.append((kind, line, head))
            if kind in ("scope", "function"):
                head_start = pos + 1
        elif ch == "}":
            if not stack:
                continue
            kind, open_line, head = stack.pop()
            if kind == "function":
                found.append(_function(head, code, raw_lines, open_line, line))
            if kind in ("scope", "function"):
                head_start = pos + 1
    return found


def _function(head, code, raw_lines, open_line, close_line):
    lead = len(head) - len(head.lstrip())
    first_line = open_line - head[lead:].count("\n")
    names = _NAME.findall(head)
    name = names[0].split("::")[-1] if names else "?"
    signature = "\n".join(raw_lines[first_line - 1:open_line])
    return Function(name=name, line=first_line, body_open=open_line, body_close=close_line,
                    waived=bool(NOLINT_SIZE.search(signature)))
