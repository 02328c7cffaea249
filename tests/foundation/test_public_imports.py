"""Every import the README and the docs show works: the public API they teach is what the
package exports, whatever its folders are."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "suites" / "README.md"]
# an import statement at the start of a line (in a code block or inline code), parenthesized
# names joined onto one line
STATEMENT = re.compile(r"^[ \t>]*`?((?:from mluverify[\w.]* import (?:\([^)]*\)|[\w, ]+(?: as \w+)?))"
                       r"|(?:import mluverify[\w.]*(?: as \w+)?))", re.MULTILINE)

CHECK = """
import sys
failed = []
for statement in sys.stdin.read().splitlines():
    try:
        exec(statement, {})
    except Exception as exc:
        failed.append(f"{statement}: {type(exc).__name__}: {exc}")
print("\\n".join(failed))
"""


def documented_imports() -> dict[str, str]:
    """statement -> the document that shows it first."""
    found = {}
    for document in DOCUMENTS:
        for match in STATEMENT.finditer(document.read_text(encoding="utf-8")):
            statement = " ".join(match.group(1).replace("(", "").replace(")", "").split()).rstrip(",")
            found.setdefault(statement, document.relative_to(ROOT).as_posix())
    return found


def test_the_documents_show_imports():
    assert len(documented_imports()) >= 10  # the pattern finds them (13 when written)


def test_every_documented_import_works():
    statements = documented_imports()
    out = subprocess.run([sys.executable, "-c", CHECK], input="\n".join(statements), capture_output=True,
                         text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr
    failures = [line for line in out.stdout.splitlines() if line]
    assert not failures, "\n".join(f"{statements[line.split(':', 1)[0]]}: {line}" for line in failures)
