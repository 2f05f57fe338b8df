"""The documentation's pointers hold (docs_map.py states the rules).

Repository: the map's paths, links and "Where to find it" definitions, every
page's links, every `<page>.md#anchor` cited in a tracked file, and no
citation of a numbered issue or of the design file outside the repository.
In the other pages (docs/**/*.md, README.md, trainer_bridge/*.md) only full
repository paths are checked: they also name files relative to a module's
include folder or to env/src/, the files a command writes and other projects'
files, which the path rule would need per-page exceptions for.

Checker: each check run on a small fixture tree, once intact (no error) and
once broken (the error it must report), so a check that cannot fail fails
here.

Run: /usr/bin/python3 -m pytest tests/docs/docs_map_test.py (ctest: docs_map).
"""

import os
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import docs_map  # noqa: E402

ROOT = os.environ.get("KFORGE_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MAP = "docs/architecture.md"


def failure_report(errors):
    return "\n" + "\n".join(errors)


class Repository(unittest.TestCase):
    def test_the_map_names_existing_paths(self):
        errors = docs_map.check_paths(ROOT, MAP)
        self.assertEqual(errors, [], failure_report(errors))

    def test_every_page_names_existing_full_paths(self):
        errors = [e for p in docs_map.documentation_pages(ROOT) if p != MAP
                  for e in docs_map.check_paths(ROOT, p, full_paths_only=True)]
        self.assertEqual(errors, [], failure_report(errors))

    def test_every_page_links_to_existing_files_and_headings(self):
        pages = docs_map.documentation_pages(ROOT)
        self.assertIn(MAP, pages)
        self.assertIn("trainer_bridge/STREAM.md", pages)
        errors = [e for p in pages for e in docs_map.check_links(ROOT, p)]
        self.assertEqual(errors, [], failure_report(errors))

    def test_cited_sections_exist(self):
        errors = docs_map.check_anchor_mentions(ROOT, docs_map.tracked_files(ROOT))
        self.assertEqual(errors, [], failure_report(errors))

    def test_cited_section_names_exist(self):
        errors = docs_map.check_section_mentions(ROOT, docs_map.tracked_files(ROOT))
        self.assertEqual(errors, [], failure_report(errors))

    def test_where_to_find_it_names_defined_functions(self):
        errors = docs_map.check_where_to_find_it(ROOT, MAP)
        self.assertEqual(errors, [], failure_report(errors))
        rows = docs_map.table_rows(docs_map.read(ROOT, MAP), "Where to find it")
        self.assertGreaterEqual(len(rows), 7)

    def test_no_citation_a_clone_cannot_follow(self):
        files = docs_map.tracked_files(ROOT)
        self.assertGreater(len(files), 500, "wrong source directory?")
        errors = docs_map.check_no_tracker_citations(ROOT, files)
        self.assertEqual(errors, [], failure_report(errors))


class Fixture(unittest.TestCase):
    """A tree with a page, a second page with headings, and sources."""

    FILES = {
        "src/engine.cpp": """
            // Engine::stop(int) is mentioned here only.
            int Engine::run(int x) const {
              return helper(x);
            }
            int helper(int x);
            struct Engine::Impl {
              void ack(int seq) { last = seq; }
              int last = 0;
            };
            """,
        "src/engine.h": "class Engine {\n public:\n  int run(int) const;\n};\n",
        "py/stream.py": "class Stream:\n    def ack(self, seq):\n        return seq\n\n\ndef free():\n    pass\n",
        "pages/other.md": ("# Other page\n\n## Wire protocol\n\n## Wire protocol\n\n"
                           "## A `code` heading, with: punctuation!\n"),
    }

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name
        for rel, text in self.FILES.items():
            self.write(rel, textwrap.dedent(text).lstrip("\n"))

    def tearDown(self):
        self.dir.cleanup()

    def write(self, rel, text):
        os.makedirs(os.path.dirname(os.path.join(self.root, rel)), exist_ok=True)
        with open(os.path.join(self.root, rel), "w", encoding="utf-8") as f:
            f.write(text)

    def page(self, text):
        self.write("pages/map.md", textwrap.dedent(text))
        return "pages/map.md"


class PathCheck(Fixture):
    def test_existing_paths_pass(self):
        page = self.page("""
            `src/engine.cpp`, `engine.h` beside it, `src/` and `src/{engine.cpp,engine.h}`;
            `<module>/engine.cpp`, `pages/*.md`, `build/<preset>/bin/`, `.cu`, `<ATen/ATen.h>`,
            `pages/other.md#wire-protocol-1`, `pages/other.md#<section>`, `a b/c`, `kforge.Stream`.

            ```
            `not/checked/in/a/fence.cpp`
            ```
            """)
        self.assertEqual(docs_map.check_paths(self.root, page), [])

    def test_missing_file_is_reported(self):
        page = self.page("See `src/engine.cc` and `src/missing/`.\n")
        errors = docs_map.check_paths(self.root, page)
        self.assertEqual(len(errors), 2, errors)
        self.assertIn("pages/map.md:1: `src/engine.cc`", errors[0])

    def test_bare_name_resolves_only_beside_a_path_of_its_paragraph(self):
        page = self.page("`src/engine.cpp` is first.\n\n`engine.h` has no path before it.\n")
        errors = docs_map.check_paths(self.root, page)
        self.assertEqual(len(errors), 1, errors)
        self.assertIn("pages/map.md:3: `engine.h`", errors[0])

    def test_unmatched_placeholder_and_brace_are_reported(self):
        page = self.page("`<module>/nothing.cpp`, `src/{engine.cpp,gone.cpp}`\n")
        errors = docs_map.check_paths(self.root, page)
        self.assertEqual(len(errors), 2, errors)
        self.assertIn("nothing.cpp", errors[0])
        self.assertIn("gone.cpp", errors[1])

    def test_only_full_paths_in_the_other_pages(self):
        page = self.page("`src/engine.cc`, `pages/gone.md`, `engine/x.h`, `kforge/core/step.h`, `out/run.json`\n")
        errors = docs_map.check_paths(self.root, page, full_paths_only=True)
        self.assertEqual(len(errors), 2, errors)
        self.assertIn("`src/engine.cc`", errors[0])
        self.assertIn("`pages/gone.md`", errors[1])
        self.assertEqual(len(docs_map.check_paths(self.root, page)), 5)

    def test_anchor_of_a_backticked_page_is_checked(self):
        page = self.page("`pages/other.md#wire-protocol-2`\n")
        errors = docs_map.check_paths(self.root, page)
        self.assertEqual(len(errors), 1, errors)
        self.assertIn("#wire-protocol-2", errors[0])


class LinkCheck(Fixture):
    def test_github_slugs(self):
        self.assertEqual(docs_map.github_slug("A `code` heading, with: punctuation!"),
                         "a-code-heading-with-punctuation")
        self.assertEqual(docs_map.github_slug("Before/after benchmarks"), "beforeafter-benchmarks")
        self.assertEqual(docs_map.github_slug("[Linked](x.md) text"), "linked-text")
        self.assertEqual(docs_map.anchors(docs_map.read(self.root, "pages/other.md")),
                         {"other-page", "wire-protocol", "wire-protocol-1", "a-code-heading-with-punctuation"})

    def test_good_links_pass(self):
        page = self.page("""
            # Map
            [up](#map), [there](other.md#wire-protocol-1), [file](../src/engine.cpp),
            [web](https://example.com/x#y), `[not a link](nowhere.md)`.
            """)
        self.assertEqual(docs_map.check_links(self.root, page), [])

    def test_missing_file_and_anchor_are_reported(self):
        page = self.page("# Map\n[a](gone.md), [b](other.md#nope), [c](#nope)\n")
        errors = docs_map.check_links(self.root, page)
        self.assertEqual(len(errors), 3, errors)
        self.assertIn("no file pages/gone.md", errors[0])
        self.assertIn("pages/other.md has the anchor #nope", errors[1])
        self.assertIn("pages/map.md has the anchor #nope", errors[2])

    def test_anchor_mentions_in_sources(self):
        # Only pages under docs/ and trainer_bridge/ are cited; the names are
        # spelled apart so that this file passes the check it tests.
        docs = "docs" + "/"
        self.write(docs + "other.md", docs_map.read(self.root, "pages/other.md"))
        self.write("src/cite.h", f"// {docs}other.md#wire-protocol and {docs}other.md#wire-protokol\n"
                                 f"// {docs}absent.md#x, pages/other.md#not-a-docs-page\n")
        errors = docs_map.check_anchor_mentions(self.root, ["src/cite.h", "src/engine.cpp"])
        self.assertEqual(len(errors), 2, errors)
        self.assertIn("src/cite.h:1", errors[0])
        self.assertIn("#wire-protokol", errors[0])
        self.assertIn(f"src/cite.h:2: {docs}absent.md#x: no file", errors[1])


    def test_section_mentions_in_sources(self):
        docs = "docs" + "/"  # spelled apart, as above
        self.write(docs + "other.md", docs_map.read(self.root, "pages/other.md") + "\n- **Pools.** spares\n")
        self.write("src/names.h", f'// {docs}other.md ("Wire protocol"), {docs}other.md, "a `code` heading"\n'
                                  f'// {docs}other.md "pools", {docs}other.md, "Wire protocols"\n'
                                  f'// {docs}absent.md ("Anything")\n')
        errors = docs_map.check_section_mentions(self.root, ["src/names.h"])
        self.assertEqual(len(errors), 2, errors)
        self.assertIn('src/names.h:2: ' + docs + 'other.md has no heading or bold label "Wire protocols"', errors[0])
        self.assertIn("src/names.h:3", errors[1])
        self.assertIn("no file", errors[1])


class WhereToFindItCheck(Fixture):
    TABLE = """
        # Map

        ## Where to find it

        | question | file | function |
        |---|---|---|
        {rows}

        ## Next
        """

    def table(self, *rows):
        return self.page(self.TABLE.replace("{rows}", "\n        ".join(rows)))

    def test_defined_names_pass(self):
        page = self.table(
            "| run? | `src/engine.cpp` | `Engine::run`, `Engine::Impl::ack`, bare `ack` |",
            "| py? | `py/stream.py` | `Stream.ack`, `free`, `Stream` |",
            "| both? | `src/engine.h` | `Engine` (`src/engine.cpp`: `Engine::run`) |")
        self.assertEqual(docs_map.check_where_to_find_it(self.root, page), [])

    def test_undefined_names_are_reported(self):
        page = self.table(
            "| a | `src/engine.cpp` | `Engine::stop` (only in a comment), `helper` (declared only) |",
            "| b | `src/engine.h` | `Engine::run` (declared only), `Stream.ack` (in another file) |",
            "| c | `src/gone.cpp` | `Engine::run` |")
        errors = docs_map.check_where_to_find_it(self.root, page)
        self.assertEqual(len(errors), 5, errors)
        for name in ("`Engine::stop`", "`helper`", "`Engine::run`", "`Stream.ack`", "names no existing file"):
            self.assertTrue(any(name in e for e in errors), (name, errors))

    def test_missing_table_is_reported(self):
        page = self.page("# Map\n\nNo table.\n")
        self.assertEqual(len(docs_map.check_where_to_find_it(self.root, page)), 1)


class CitationCheck(Fixture):
    def test_numbered_issues_and_the_design_file_are_reported(self):
        number = "4" + "2"  # spelled apart so that this file passes the check it tests
        self.write("a.cpp", f"// see issue {number}\n// Issues #{number}, 7\n"
                            f"// fine: issues with it\n// the issue-{number} fixes\n")
        self.write("b.md", "as " + "DESIGN" + ".md says\n")
        errors = docs_map.check_no_tracker_citations(self.root, ["a.cpp", "b.md", "src/engine.cpp"])
        self.assertEqual(len(errors), 4, errors)
        self.assertTrue(errors[0].startswith("a.cpp:1:"))
        self.assertTrue(errors[1].startswith("a.cpp:2:"))
        self.assertTrue(errors[2].startswith("a.cpp:4:"))
        self.assertTrue(errors[3].startswith("b.md:1:"))


if __name__ == "__main__":
    unittest.main()
