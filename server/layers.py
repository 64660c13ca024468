#!/usr/bin/env python3
"""layers.py — reads server/layers.txt (the server's layers) and checks what follows from it.

  layers.py links [--nm NM] [--table FILE] FOLDER=LIBRARY...
      the build's layer check (server/CMakeLists.txt runs it after the libraries are built):
      every symbol a folder's library leaves undefined and another folder's library defines must
      come from a lower level. Fails with one line per wrong-way call, naming both layers.
  layers.py docs --check|--write [--table FILE] [DOC]
      the generated block of docs/layout.md (default) against the table: --check fails when it
      differs, --write rewrites it.

Both read only the Python standard library and binutils' nm; .ci/check-includes imports read().
"""
import fnmatch
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = os.path.join(HERE, "layers.txt")


class Table:
    """The table: levels[folder] = level, in file order; targets[folder] = the CMake targets after
    it; only = [(header pattern with its < > or " ", {folders})]."""

    def __init__(self):
        self.levels = {}
        self.targets = {}
        self.only = []

    def allowed(self, header, folder):
        """The folders an #include of header (written <x> or "x") is limited to, when one of the
        table's "only" lines names it and folder is not among them; else None."""
        for pattern, folders in self.only:
            if pattern[0] == header[0] and fnmatch.fnmatchcase(header[1:-1], pattern[1:-1]):
                if folder not in folders:
                    return folders
        return None


def read(path=TABLE):
    """The table at path; raises ValueError naming the file, line and what is wrong."""
    t = Table()
    with open(path, encoding="utf-8") as fh:
        for n, raw in enumerate(fh, 1):
            line = raw.split("#", 1)[0].split()
            if not line:
                continue
            where = f"{path}:{n}"
            if line[0] == "only":
                if len(line) < 3 or not re.fullmatch(r'<[^<>"]+>|"[^<>"]+"', line[1]):
                    raise ValueError(f'{where}: expected only <HEADER>|"HEADER" FOLDER..., got {raw.strip()!r}')
                t.only.append((line[1], set(line[2:])))
            elif line[0].isdigit():
                if len(line) < 2:
                    raise ValueError(f"{where}: expected LEVEL FOLDER [TARGET...], got {raw.strip()!r}")
                if line[1] in t.levels:
                    raise ValueError(f"{where}: folder {line[1]} is in the table twice")
                t.levels[line[1]] = int(line[0])
                t.targets[line[1]] = line[2:]
            else:
                raise ValueError(f"{where}: a line is LEVEL FOLDER [TARGET...] or only HEADER FOLDER..., "
                                 f"got {raw.strip()!r}")
    for _, folders in t.only:
        for f in folders - set(t.levels):
            raise ValueError(f"{path}: an only line names folder {f}, which has no level")
    return t


# --- links: the build's check of the libraries' symbols

UNDEFINED = set("Uwv")  # nm's types of a symbol used but not defined (v, w: weak)


def symbols(nm, lib):
    """(defined, used) of a static library: {symbol: object} each, from nm's POSIX output, the
    symbols an object uses that another object of the same library defines left out."""
    out = subprocess.run([nm, "-A", "-g", "-P", lib], check=True, capture_output=True, text=True).stdout
    defined, used = {}, {}
    for line in out.splitlines():
        # GNU nm: "libidem_store.a[store_pg.c.o]: store_pg_open T 0000000000000000 00000000000000b2";
        # llvm-nm: "libidem_store.a:store_pg.c.o: store_pg_open T ..."
        m = re.match(r"^(?P<where>.*):\s+(?P<sym>\S+)\s+(?P<type>\S)(\s|$)", line)
        if not m:
            continue
        where = m.group("where")
        member = re.search(r"\[([^\]]+)\]$", where)
        obj = member.group(1) if member else os.path.basename(where.rsplit(":", 1)[-1])
        (used if m.group("type") in UNDEFINED else defined).setdefault(m.group("sym"), obj)
    if out.strip() and not defined and not used:
        raise ValueError(f"{nm} -A -g -P {lib}: no line read as OBJECT: SYMBOL TYPE; its first line: "
                         f"{out.splitlines()[0]!r}")
    return defined, {s: o for s, o in used.items() if s not in defined}


def check_links(table, nm, libs):
    """One line per call from a folder's library to a folder at its level or above."""
    where = {}  # symbol -> [folders defining it]
    uses = {}
    for folder, lib in libs.items():
        defined, uses[folder] = symbols(nm, lib)
        for s in defined:
            where.setdefault(s, []).append(folder)
    bad = []
    for folder in sorted(uses, key=lambda f: (table.levels[f], f)):
        me = table.levels[folder]
        for sym, obj in sorted(uses[folder].items()):
            owners = where.get(sym, [])
            if not owners or any(table.levels[o] < me for o in owners):
                continue  # outside the server (libc, libpq, ...), or a lower layer
            o = owners[0]
            how = "a sibling" if table.levels[o] == me else "a higher"
            bad.append(f"layer {folder} ({me}) calls {sym} of layer {o} ({table.levels[o]}), {how} "
                       f"layer [{folder}/{obj}]: a layer may call only the levels below it "
                       f"(server/layers.txt)")
    return bad


# --- docs: the block of docs/layout.md generated from the table

BEGIN = "<!-- layers: generated from server/layers.txt by `python3 server/layers.py docs --write` -->"
END = "<!-- layers: end -->"


def render(table):
    """The markdown block: the levels top down, then the headers only some folders include."""
    rows = ["```", "level  folders (each may call and #include only the levels below it)"]
    for level in sorted(set(table.levels.values()), reverse=True):
        names = [f if f.endswith(".c") else f + "/" for f, lv in table.levels.items() if lv == level]
        rows.append(f"{level:>5}  {'  '.join(names)}")
    rows.append("")
    rows.append("#include                  only in")
    for pattern, folders in table.only:
        names = [f + "/" for f in table.levels if f in folders]
        rows.append(f"{pattern:<25} {', '.join(names)}")
    rows.append("```")
    return "\n".join(rows) + "\n"


def docs(table, doc, write):
    with open(doc, encoding="utf-8") as fh:
        text = fh.read()
    begin, end = text.find(BEGIN), text.find(END)
    if begin < 0 or end < begin:
        print(f"{doc}: no block between {BEGIN} and {END}")
        return 1
    head = begin + len(BEGIN) + 1
    want = text[:head] + render(table) + text[end:]
    if want == text:
        print(f"layers docs: {doc} matches server/layers.txt")
        return 0
    if write:
        with open(doc, "w", encoding="utf-8") as fh:
            fh.write(want)
        print(f"layers docs: {doc} rewritten from server/layers.txt")
        return 0
    print(f"layers docs: {doc} differs from server/layers.txt; run python3 server/layers.py docs --write")
    print("it should read:\n" + render(table), end="")
    return 1


def main(argv):
    if not argv or argv[0] not in ("links", "docs"):
        print(__doc__.strip())
        return 2
    cmd, args = argv[0], argv[1:]
    opts = {"--nm": "nm", "--table": TABLE}
    rest = []
    while args:
        a = args.pop(0)
        if a in opts:
            opts[a] = args.pop(0)
        else:
            rest.append(a)
    try:
        table = read(opts["--table"])
    except (OSError, ValueError) as e:
        print(f"layers: {e}")
        return 1
    if cmd == "docs":
        flags = [a for a in rest if a in ("--check", "--write")]
        doc = os.path.normpath(os.path.join(HERE, "..", "docs", "layout.md"))
        docs_path = [a for a in rest if a not in flags] or [doc]
        if len(flags) != 1:
            print("layers docs: give --check or --write")
            return 2
        return docs(table, docs_path[0], flags[0] == "--write")
    libs = {}
    for a in rest:
        folder, sep, lib = a.partition("=")
        if not sep or folder not in table.levels:
            print(f"layers links: {a}: expected FOLDER=LIBRARY with a FOLDER of the table "
                  f"({', '.join(table.levels)})")
            return 2
        libs[folder] = lib
    try:
        bad = check_links(table, opts["--nm"], libs)
    except (OSError, subprocess.CalledProcessError, ValueError) as e:
        print(f"layers links: {e}")
        return 1
    for b in bad:
        print(b)
    print(f"layers links: {len(bad)} wrong-way call(s) in {len(libs)} libraries" if bad else
          f"layers links: every call in {len(libs)} libraries points down server/layers.txt")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
