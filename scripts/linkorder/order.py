#!/usr/bin/env python3
"""Executed code -> the linker's symbol order.

usage: order.py <out> <phase>...   (scripts/linkorder/regen.sh runs it)
       order.py --check <order> <lld map>   (scripts/linkorder/check.sh runs it)

A phase is a comma-separated list of `<trace>@<lld map>`: a trace is any text whose hex
numbers are addresses the binary executed or faulted on (a callgrind profile written with
`--dump-instr=yes`, or `perf script` lines of `exceptions:page_fault_user`), and the map is
the one written when that binary was linked. Each address falls in one input section of
`.text`; that section's symbol goes in the order. The first phase's symbols come first
(what boot runs), then what each later one adds; within a phase they are sorted by name, so
a regenerated file diffs by what changed. Stdlib only.
"""
import bisect, re, sys

# lld's map: VMA, LMA, size, alignment, then the output section at column 49, an input
# section 8 columns further in, the symbols it defines 16 further.
NAME_AT = 49
SECTION = re.compile(r":\((\.text[^)]*)\)\s*$")
PREFIXES = (".text.unlikely.", ".text.hot.", ".text.startup.", ".text.exit.", ".text.")
C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def text_sections(mapfile):
    """Sorted (start, size, symbol) of every orderable `.text` input section in the map."""
    sections, in_text = [], False
    for line in open(mapfile):
        name = line[NAME_AT:].rstrip("\n")
        if not name.startswith(" "):
            in_text = name.startswith(".text")
            continue
        if not in_text:
            continue
        if name.startswith(" " * 16):
            # A plain `.text` (an object built without per-function sections, like crt1.o)
            # is ordered by the first C symbol it defines (`_start`).
            symbol = name.strip()
            if sections and sections[-1][2] == "" and C_NAME.fullmatch(symbol):
                sections[-1] = sections[-1][:2] + (symbol,)
            continue
        try:
            start, size = int(line[:16], 16), int(line[34:42], 16)
        except ValueError:
            continue
        m = SECTION.search(name)
        section = m.group(1) if m else ""
        symbol = next((section[len(p):] for p in PREFIXES if section.startswith(p)), "")
        sections.append((start, size, symbol))
    sections = [s for s in sections if s[2]]
    if not sections:
        sys.exit(f"{mapfile}: no .text input sections found (not an lld map?)")
    sections.sort()
    return sections


def main(out, phases):
    maps = {}
    address = re.compile(r"0x([0-9a-f]+)")
    seen, order = set(), []
    for n, phase_spec in enumerate(phases, 1):
        phase = {}
        for spec in phase_spec.split(","):
            trace, mapfile = spec.rsplit("@", 1)
            if mapfile not in maps:
                maps[mapfile] = text_sections(mapfile)
            sections = maps[mapfile]
            starts = [s[0] for s in sections]
            with open(trace) as f:
                for line in f:
                    for m in address.finditer(line):
                        a = int(m.group(1), 16)
                        i = bisect.bisect_right(starts, a) - 1
                        if i >= 0 and a < sections[i][0] + max(sections[i][1], 1):
                            phase[sections[i][2]] = sections[i][1]
        new = sorted(set(phase) - seen)
        seen |= set(phase)
        order += new
        print(f"phase {n}: {len(phase)} functions ({sum(phase.values()) // 1024} KiB), "
              f"{len(new)} not in an earlier phase", file=sys.stderr)
    with open(out, "w") as f:
        f.write("".join(s + "\n" for s in order))
    print(f"{out}: {len(order)} symbols", file=sys.stderr)


def check(order_file, mapfile):
    """How many of the order's names a build has (and their code); exit 1 when stale.

    lld skips a name the build lacks without a word (we pass `--no-warn-symbol-ordering`), so a
    toolchain or dependency bump, or dev-dependency features unified into the build, leaves the
    code scattered again with nothing failing but RSS."""
    names = [n.strip() for n in open(order_file) if n.strip()]
    where = {s[2]: (s[0], s[1]) for s in text_sections(mapfile)}
    found = [where[n] for n in names if n in where]
    share = len(found) / max(len(names), 1)
    print(f"{order_file}: {len(found)} of {len(names)} names in this build ({share:.0%}), "
          f"{sum(n for _, n in found) // 1024} KiB of code")
    # 98 %: at 92 % (stops 44-46, sandbox code only) RSS at ready had grown 5.7 -> 8.6 MiB.
    if share < 0.98:
        sys.exit("stale: regenerate it with scripts/linkorder/regen.sh, or build the binary "
                 "in a cargo command of its own (an example or test in the same command "
                 "changes the dependencies' features, and with them every symbol's hash)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--check"] and len(sys.argv) == 4:
        check(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1], sys.argv[2:])
