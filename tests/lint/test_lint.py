"""scripts/lint: the function scanner and the source checks, on files written here."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "lint"))

import check_sources  # noqa: E402
import cxx_functions  # noqa: E402


def body(n, indent="  "):
    return "".join(f"{indent}x += {i};\n" for i in range(n))


def sizes(text):
    return {(f.name, f.lines) for f in cxx_functions.functions(text)}


def test_a_free_function_counts_as_clang_tidy_does():
    # clang-tidy: the line of `}` minus the line of `{`.
    text = "int f(int x) {\n" + body(3) + "  return x;\n}\n"
    assert sizes(text) == {("f", 5)}


def test_braces_in_comments_literals_and_preprocessor_lines_do_not_count():
    text = (
        "#define OPEN {\n"
        "int f() {\n"
        "  // } a brace in a comment\n"
        "  /* { another\n   } */\n"
        '  const char* s = "}{";\n'
        "  char c = '}';\n"
        '  const char* r = R"x(})x";\n'
        "  int big = 1'000;\n"
        "  return 0;\n"
        "}\n"
        "int g() { return 1; }\n"
    )
    assert sizes(text) == {("f", 9), ("g", 0)}


def test_scopes_tables_and_member_initializers_are_not_functions():
    text = (
        "namespace kforge::env {\n"
        'extern "C" {\n'
        "int c_api(int x) {\n  return x;\n}\n"
        "}\n"
        "enum class Kind { kA, kB };\n"
        "const int kTable[] = {\n  1,\n  2,\n};\n"
        "struct S : Base {\n"
        "  int a_{0};\n"
        "  S(int a, int b) : Base{a}, a_{b} {\n    run();\n  }\n"
        "  bool operator==(const S& o) const {\n    return a_ == o.a_;\n  }\n"
        "  void lambda_inside() {\n    auto f = [](int v) {\n      return v;\n    };\n    f(1);\n  }\n"
        "};\n"
        "}  // namespace kforge::env\n"
    )
    assert sizes(text) == {("c_api", 2), ("S", 2), ("operator==", 2), ("lambda_inside", 5)}


def test_a_template_and_an_out_of_class_member():
    text = (
        "template <typename T>\n"
        "std::vector<T> Pool<T>::take(std::size_t n) const noexcept {\n"
        + body(90) + "}\n"
    )
    [fn] = cxx_functions.functions(text)
    assert (fn.name, fn.line, fn.lines, fn.waived) == ("take", 1, 91, False)


def test_a_waiver_on_the_signature_is_seen():
    text = "void register_ops(Registry& r) {  // NOLINT(readability-function-size): one row per op\n" + body(90) + "}\n"
    [fn] = cxx_functions.functions(text)
    assert fn.waived and fn.lines == 91


def write(tmp_path, rel, text):
    p = tmp_path / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return rel


def test_each_rule_finds_its_breach_and_nothing_else(tmp_path):
    files = [
        write(tmp_path, "env/src/long.cpp", "void long_one() {\n" + body(81) + "}\nvoid short_one() {\n" + body(79) + "}\n"),
        write(tmp_path, "env/src/big.h", "// big\n" * 601),
        write(tmp_path, "env/src/fine.h", "// fine\n" * 600),
        write(tmp_path, "core/src/ns.cpp", "namespace kforge::ref::detail {\n}\nnamespace internal {\n}\n"),
        write(tmp_path, "scripts/tool.py",
              "def long_one():\n" + body(81, "    ") + "\n"
              "def waived():  # lint: long-function one table\n" + body(90, "    ") + "\n"
              "def short_one():\n" + body(80, "    ")),
        # Tests are scenarios: long functions there are not findings; inputs are not ours.
        write(tmp_path, "tests/judge/t.cpp", "void t() {\n" + body(200) + "}\n"),
        write(tmp_path, "tests/adversarial/huge.cpp", "// x\n" * 900),
    ]
    findings = check_sources.check(tmp_path, files)
    rules = sorted((f.split(":")[0], f.split(": ")[1]) for f in findings)
    assert rules == [
        ("core/src/ns.cpp", "namespace"),
        ("env/src/big.h", "file-size"),
        ("env/src/long.cpp", "function-size"),
        ("scripts/tool.py", "function-size"),
    ], findings
    assert any("`long_one` has a body of 82 lines" in f for f in findings if f.startswith("env/"))
    assert any("`long_one` has a body of 81 lines" in f for f in findings if f.startswith("scripts/"))


def test_the_command_exits_1_on_a_finding_and_0_when_clean(tmp_path):
    write(tmp_path, "env/src/ok.cpp", "int f() {\n  return 0;\n}\n")
    script = ROOT / "scripts" / "lint" / "check_sources.py"
    clean = subprocess.run([sys.executable, script, "--root", tmp_path, "env/src/ok.cpp"], capture_output=True, text=True)
    assert clean.returncode == 0 and clean.stdout == ""
    write(tmp_path, "env/src/bad.cpp", "namespace pool_detail {\n}\n")
    bad = subprocess.run([sys.executable, script, "--root", tmp_path, "env/src/bad.cpp"], capture_output=True, text=True)
    assert bad.returncode == 1 and "env/src/bad.cpp:1: namespace: `pool_detail`" in bad.stdout


def test_the_scanner_measures_the_fixture_as_clang_tidy_does():
    # The same rule read from the AST: clang-tidy's readability-function-size
    # with a threshold of 0 reports every function of more than one line,
    # with its size in a note. The fixture holds what the scanner must get
    # right (comments, literals, initializer lists, lambdas, templates, extern "C").
    import re
    import shutil
    tidy = shutil.which("clang-tidy")
    assert tidy, "clang-tidy is missing: ./run deps installs it (Debian package clang-tidy)"
    fixture = ROOT / "tests" / "lint" / "fixtures" / "functions.cpp"
    out = subprocess.run(
        [tidy, str(fixture), "--quiet", "--checks=-*,readability-function-size",
         "--config={CheckOptions: [{key: readability-function-size.LineThreshold, value: 0}]}", "--", "-std=c++17"],
        capture_output=True, text=True, timeout=60).stdout
    names = re.findall(r":(\d+):\d+: warning: function '([^']+)' exceeds", out)
    sizes_ = re.findall(r": note: (\d+) lines including whitespace", out)
    by_tidy = {(name, int(n)) for (_, name), n in zip(names, sizes_)}
    by_scanner = {(f.name, f.lines) for f in cxx_functions.functions(fixture.read_text()) if f.lines > 0}
    assert len(by_tidy) == 8, out
    assert by_scanner == by_tidy
