"""Checks that the documentation's pointers into the repository hold.

The map (docs/architecture.md) and the other pages name files, folders,
sections and functions; code comments point at sections
(`docs/architecture.md#<section>`). Each check below returns a list of
"file:line: what is wrong" strings, empty when all is well; docs_map_test.py
runs them on the repository and on small broken fixtures (so that each one is
known to fail when it should). Standard library only.

The rules, stated once:

Paths. A backticked token outside fenced code blocks is a repository path
when it has no space and either contains `/` or ends in one of
PATH_EXTENSIONS. It must exist, relative to the repository root or to the
folder of a path named earlier in the same paragraph (a table row is a
paragraph): "`env/src/runner/sandbox.h`, `landlock.h`" names
env/src/runner/landlock.h. Not paths: tokens with `://`, absolute paths (`/`,
`~`, `$`), a bare extension (`.cu`), an include in angle brackets
(`<ATen/ATen.h>`), and anything under `build/` (build outputs, absent in a
clone). Placeholders: `<name>` and `*` stand for one path component and must match at
least one existing path; `{a,b}` is expanded and each must exist; a trailing
`#anchor` is checked like a link's, unless it is a `<placeholder>`.

The other pages (docs/**/*.md, README.md, trainer_bridge/*.md) name files
in shorthand too (`judge/l2_flush.*` for env/src/judge/, `kforge/env/eval.h`
as it is included, the files a command writes, other projects' files): there
only full paths are checked, tokens whose first component is an entry of the
repository root (`core/`, `env/`, `docs/`, `README.md`, ...).

Links. Every `[text](target)` whose target is not a URL must name an existing
file, relative to the page; a `#anchor` must be the GitHub slug of a heading
of that file (lower case; characters other than letters, digits, spaces, `-`
and `_` dropped; spaces become `-`; repeated headings get `-1`, `-2`, ...).

Anchor mentions. In every tracked text file, `<page>.md#anchor` for a page
under docs/ or trainer_bridge/ must resolve the same way (code comments cite
the map by section).

Section mentions. In every tracked text file, a page under docs/ or
trainer_bridge/ followed by a quoted name (`docs/execution.md ("Wire
protocol")`, `docs/cuda-backend.md, "Pools"`) must name the start of one of
that page's headings or bold labels (`**Pools**`), ignoring case.

Where to find it. In that table of the map, each backticked identifier of
the third column (`Class::method`, `Class.method` for Python, `function`,
`Type`) must be defined in a file the row names (the second column or a
backticked path of the third): out of class as `Class::method(...) ... {`, in
the body of `class|struct Class` as `method(...) ... {`, or as
`function(...) ... {`, `class|struct Type ... {`; in Python `def` inside
`class`. A bare name in a row that names `Class::other` may also be a member
of that class ("`StepEngine::run` (... `act` ...)" names StepEngine::act).
Comments are ignored; a declaration (`;` after the parameters) is not a
definition.

Tracker citations. No tracked file may cite a numbered issue (the word
"issue" or "issues" followed by a number, with or without `#` or `-`) or the
design file that is not in the repository: a clone has neither the tracker
nor that file, so the reason belongs in words or in a pointer into docs/.
"""

import fnmatch
import os
import re
import subprocess

PATH_EXTENSIONS = (
    "cpp", "h", "hpp", "cc", "cu", "cuh", "py", "md", "yaml", "yml", "json",
    "txt", "cmake", "sh", "toml", "html", "in",
)
GENERATED_PREFIXES = ("build/",)

_FENCE = re.compile(r"^\s*(```|~~~)")
_BACKTICKED = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_EXT = re.compile(r"\.(" + "|".join(PATH_EXTENSIONS) + r")$")
_CITATION = re.compile(r"\bissues?[\s_-]+#?\d+|\bDESIGN\.md\b", re.IGNORECASE)
_SECTION_MENTION = re.compile(r"\b((?:docs|trainer_bridge)/[\w./-]*?\.md)(?:,\s*|\s+\(|\s+)\"([^\"\n]+)\"")
_BOLD = re.compile(r"\*\*([^*\n]+?)\*\*")
_ANCHOR_MENTION = re.compile(r"\b((?:docs|trainer_bridge)/[\w./-]*?\.md)#([\w-]+)")


# ---------------------------------------------------------------- reading


def read(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        return f.read()


def prose_lines(text):
    """(line number, line) outside fenced code blocks."""
    out, fenced = [], False
    for n, line in enumerate(text.split("\n"), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((n, line))
    return out


def paragraphs(text):
    """Lists of (line number, line): prose split at blank lines; each table
    row on its own."""
    out, current = [], []
    for n, line in prose_lines(text):
        if not line.strip() or line.lstrip().startswith("|"):
            if current:
                out.append(current)
            current = []
            if line.strip():
                out.append([(n, line)])
            continue
        current.append((n, line))
    if current:
        out.append(current)
    return out


def github_slug(heading):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(text):
    seen, out = {}, set()
    for _, line in prose_lines(text):
        m = _HEADING.match(line)
        if not m:
            continue
        slug = github_slug(m.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def tracked_files(root):
    """Tracked files (git ls-files), or every file outside build/ and hidden
    folders when the tree is not a git checkout."""
    try:
        listed = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True, check=True)
        files = [f for f in listed.stdout.decode().split("\0") if f]
        if files:
            return [f for f in files if os.path.isfile(os.path.join(root, f))]
    except (OSError, subprocess.CalledProcessError):
        pass
    out = []
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".") and not (d == root and x == "build")]
        out += [os.path.relpath(os.path.join(d, n), root) for n in names]
    return out


def text_of(root, rel):
    """The file's text, or None for a binary file."""
    with open(os.path.join(root, rel), "rb") as f:
        data = f.read()
    if b"\0" in data:
        return None
    return data.decode("utf-8", errors="replace")


# ---------------------------------------------------------------- paths


def is_path_token(token):
    if re.search(r"\s", token) or "://" in token or token[0] in "/~$":
        return False
    if re.fullmatch(r"\.\w+", token) or re.fullmatch(r"<[^<>]+>", token):
        return False  # an extension (`.cu`) or an include (`<ATen/ATen.h>`)
    bare = token.split("#", 1)[0]
    return "/" in bare or bool(_EXT.search(bare))


def expand_braces(token):
    m = re.search(r"\{([^{}]*)\}", token)
    if not m:
        return [token]
    out = []
    for part in m.group(1).split(","):
        out += expand_braces(token[: m.start()] + part + token[m.end():])
    return out


def matches(root, base, pattern):
    """Existing paths (relative to root) that `pattern` names from `base`."""
    pattern = re.sub(r"<[^<>/]+>", "*", pattern).rstrip("/")
    full = os.path.normpath(os.path.join(base, pattern)) if pattern else base
    if "*" not in full:
        return [full] if os.path.exists(os.path.join(root, full)) else []
    parts, found = full.split("/"), [""]
    for part in parts:
        nxt = []
        for d in found:
            here = os.path.join(root, d)
            if not os.path.isdir(here):
                continue
            names = fnmatch.filter(sorted(os.listdir(here)), part) if "*" in part else [part]
            nxt += [os.path.join(d, n) for n in names if os.path.exists(os.path.join(here, n))]
        found = nxt
    return found


def check_anchor(root, page_rel, anchor, where):
    if re.fullmatch(r"<[^<>]+>", anchor):
        return []
    if anchor not in anchors(read(root, page_rel)):
        return [f"{where}: no heading in {page_rel} has the anchor #{anchor}"]
    return []


def is_full_path(root, token):
    """Starts at the repository root: `env/src/...`, not `judge/...` for
    env/src/judge/ nor `kforge/env/eval.h` as included."""
    first = token.split("/", 1)[0]
    return "/" in token and not first.startswith(".") and os.path.exists(os.path.join(root, first))


def check_paths(root, md_rel, full_paths_only=False):
    errors = []
    for para in paragraphs(read(root, md_rel)):
        bases = [""]
        for n, line in para:
            for token in _BACKTICKED.findall(line):
                if not is_path_token(token) or token.startswith(GENERATED_PREFIXES):
                    continue
                if full_paths_only and not is_full_path(root, token):
                    continue
                where = f"{md_rel}:{n}"
                path, _, anchor = token.partition("#")
                for one in expand_braces(path):
                    found = next((m for b in bases for m in [matches(root, b, one)] if m), [])
                    if not found:
                        errors.append(f"{where}: `{token}` names no file or folder of the repository")
                        continue
                    for f in found:
                        bases.append(f if os.path.isdir(os.path.join(root, f)) else os.path.dirname(f))
                        if anchor and f.endswith(".md"):
                            errors += check_anchor(root, f, anchor, where)
    return errors


# ---------------------------------------------------------------- links


def check_links(root, md_rel):
    errors = []
    for n, line in prose_lines(read(root, md_rel)):
        line = _BACKTICKED.sub("", line)
        for target in _LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue
            where = f"{md_rel}:{n}"
            path, _, anchor = target.partition("#")
            page = os.path.normpath(os.path.join(os.path.dirname(md_rel), path)) if path else md_rel
            if not os.path.exists(os.path.join(root, page)):
                errors.append(f"{where}: link to {target}: no file {page}")
            elif anchor:
                errors += check_anchor(root, page, anchor, where)
    return errors


def check_anchor_mentions(root, files):
    errors = []
    for rel in files:
        text = text_of(root, rel)
        if text is None:
            continue
        for n, line in enumerate(text.split("\n"), 1):
            for page, anchor in _ANCHOR_MENTION.findall(line):
                if not os.path.isfile(os.path.join(root, page)):
                    errors.append(f"{rel}:{n}: {page}#{anchor}: no file {page}")
                else:
                    errors += check_anchor(root, page, anchor, f"{rel}:{n}")
    return errors


def section_names(text):
    """Headings and bold labels of a page, lower case, without markup."""
    names = []
    for _, line in prose_lines(text):
        m = _HEADING.match(line)
        if m:
            names.append(m.group(2))
        names += _BOLD.findall(line)
    return [n.replace("`", "").strip().lower() for n in names]


def check_section_mentions(root, files):
    errors, cache = [], {}
    for rel in files:
        text = text_of(root, rel)
        if text is None:
            continue
        for n, line in enumerate(text.split("\n"), 1):
            for page, name in _SECTION_MENTION.findall(line):
                if not os.path.isfile(os.path.join(root, page)):
                    errors.append(f"{rel}:{n}: {page} \"{name}\": no file {page}")
                    continue
                if page not in cache:
                    cache[page] = section_names(read(root, page))
                wanted = name.replace("`", "").strip().lower()
                if not any(s.startswith(wanted) for s in cache[page]):
                    errors.append(f"{rel}:{n}: {page} has no heading or bold label \"{name}\"")
    return errors


# ---------------------------------------------------------------- definitions


def strip_comments(code, python):
    if python:
        return re.sub(r"#[^\n]*", "", code)
    code = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), code, flags=re.S)
    return re.sub(r"//[^\n]*", "", code)


def closing(code, i, open_c, close_c):
    """Index just past the bracket that closes the one at code[i]."""
    depth = 0
    for j in range(i, len(code)):
        if code[j] == open_c:
            depth += 1
        elif code[j] == close_c:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(code)


_AFTER_PARAMS = re.compile(r"\s*(?:(?:const|override|final|noexcept|mutable)\b\s*|->\s*[\w:<>,\s*&]+?(?=\{))*\{")


def defines_function(code, qualified):
    """`qualified(...) qualifiers {` at a place that is not a member call."""
    pattern = re.compile(r"(?<![\w.>:])" + re.escape(qualified) + r"\s*\(")
    for m in pattern.finditer(code):
        end = closing(code, m.end() - 1, "(", ")")
        if _AFTER_PARAMS.match(code, end):
            return True
    return False


def class_bodies(code, name):
    head = re.compile(r"\b(?:class|struct)\s+(?:\w+::)*" + re.escape(name) + r"\b[^;{()]*\{")
    return [code[m.end() - 1: closing(code, m.end() - 1, "{", "}")] for m in head.finditer(code)]


def defined_in(code, name, python):
    if python:
        parts = name.split(".")
        if len(parts) == 1:
            return bool(re.search(r"^\s*(def|class)\s+" + re.escape(name) + r"\b", code, re.M))
        m = re.search(r"^class\s+" + re.escape(parts[0]) + r"\b.*?(?=^\S|\Z)", code, re.M | re.S)
        return bool(m and re.search(r"^\s+def\s+" + re.escape(parts[1]) + r"\s*\(", m.group(0), re.M))
    parts = name.split("::")
    if len(parts) == 1:
        return defines_function(code, name) or bool(class_bodies(code, name))
    if defines_function(code, name):
        return True
    return any(defines_function(body, parts[-1]) for body in class_bodies(code, parts[-2]))


def table_rows(text, heading):
    """Cells of each body row of the first table after `heading`."""
    rows, inside = [], False
    for n, line in prose_lines(text):
        if _HEADING.match(line):
            inside = _HEADING.match(line).group(2) == heading
            continue
        if inside and line.lstrip().startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                rows.append((n, cells))
    return rows[1:]  # the header row


_IDENTIFIER = re.compile(r"[A-Za-z_]\w*(?:(?:::|\.)[A-Za-z_]\w*)*")


def check_where_to_find_it(root, md_rel, heading="Where to find it"):
    text = read(root, md_rel)
    rows = table_rows(text, heading)
    if not rows:
        return [f"{md_rel}: no table under the heading \"{heading}\""]
    errors = []
    for n, cells in rows:
        tokens = [t for c in cells[1:] for t in _BACKTICKED.findall(c)]
        files = [t for t in tokens if is_path_token(t) and os.path.isfile(os.path.join(root, t))]
        if not files:
            errors.append(f"{md_rel}:{n}: the row names no existing file")
            continue
        names = [t for t in _BACKTICKED.findall(cells[2]) if _IDENTIFIER.fullmatch(t) and not is_path_token(t)]
        classes = {n.rsplit("::", 1)[0] for n in names if "::" in n}
        for name in names:
            bare = "::" not in name and "." not in name
            spellings = [name] + ([f"{c}::{name}" for c in sorted(classes)] if bare else [])
            if not any(defined_in(strip_comments(read(root, f), f.endswith(".py")), s, f.endswith(".py"))
                       for f in files for s in spellings):
                errors.append(f"{md_rel}:{n}: `{name}` is defined in none of {', '.join(files)}")
    return errors


# ---------------------------------------------------------------- citations


def check_no_tracker_citations(root, files):
    errors = []
    for rel in files:
        text = text_of(root, rel)
        if text is None:
            continue
        for n, line in enumerate(text.split("\n"), 1):
            m = _CITATION.search(line)
            if m:
                errors.append(f"{rel}:{n}: cites \"{m.group(0)}\", which a clone cannot follow")
    return errors


def documentation_pages(root):
    """The pages whose paths and links are checked."""
    pages = ["README.md"]
    for folder in ("docs", "trainer_bridge"):
        for d, _, names in os.walk(os.path.join(root, folder)):
            if folder == "trainer_bridge" and d != os.path.join(root, folder):
                continue
            pages += sorted(os.path.relpath(os.path.join(d, n), root) for n in names if n.endswith(".md"))
    return pages
