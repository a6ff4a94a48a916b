#!/usr/bin/env python3
"""Compares Strata's `message!` declarations (protocol/src/messages/*.rs) field by field
with Apache Kafka's message JSON: struct and field names in order, versions, tags,
types, nullability (including `null [..]` ranges) and defaults.

The oracle tests (cargo test --test oracle) are the main check, but they see only what
kafka-protocol knows; this also covers versions newer than it.

Usage: python3 check_decls.py SPEC_DIR [SPEC_DIR ...]

Each SPEC_DIR is the clients/src/main/resources/common/message/ directory of one Kafka
release. Each is compared over the versions that both its spec and our codec define,
so give the newest (trunk) together with an older release that still defines the
versions Kafka has since removed but we still decode (3.9 has Fetch v0-3 and
AlterPartition v0-1; trunk dropped them and their fields from the JSON):

    python3 check_decls.py kafka-trunk/.../message kafka-3.9/.../message

A version we declare that no SPEC_DIR defines is a difference; a version the first
(newest) SPEC_DIR defines beyond ours is printed as a note. Exits 1 and lists the
differences if there are any.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_spec import (  # noqa: E402
    APIS, load_spec, rust_struct_name, snake, spec_struct_names, vrange,
)

MESSAGES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../src/messages")
FIELD = re.compile(
    r"^\s*(\w+): (.+?) \[([^\]]*)\](?: null \[([^\]]*)\])?(?: tag (\d+))?(?: = (.+?))?,\s*$",
    re.M,
)
TYPES = {
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint16": "u16",
    "float64": "f64", "bool": "bool", "string": "String", "bytes": "Bytes",
    "records": "Bytes", "uuid": "Uuid",
}
# Fetch responses hold records as a RecordSet (zero-copy file ranges), Produce as Bytes.
RECORDS_TYPES = {"Bytes", "RecordSet"}


def parse_ours(path):
    src = open(path).read()
    lo, hi = map(int, re.search(r"VERSIONS: \(i16, i16\) = \((\d+), (\d+)\)", src).groups())
    flexible_from = re.search(r"FLEXIBLE_FROM: i16 = ([^;]+);", src).group(1)
    structs = {}
    for m in re.finditer(r"pub struct (\w+) \{(.*?)\n    \}", src, re.S):
        structs[m.group(1)] = [
            dict(name=f[0], ty=f[1], rng=f[2], null=f[3], tag=f[4], default=f[5] or None)
            for f in FIELD.findall(m.group(2))
        ]
    return lo, hi, flexible_from, structs


def rust_range(r, hi):
    m = re.fullmatch(r"(\d+)\.\.(=?)(\d*)", r)
    lo = int(m.group(1))
    if not m.group(3):
        return lo, hi
    up = int(m.group(3))
    return lo, (up if m.group(2) == "=" else up - 1)


def clip(r, window):
    """`r` restricted to `window`, or None if they do not meet."""
    if r is None:
        return None
    lo, hi = max(r[0], window[0]), min(r[1], window[1])
    return (lo, hi) if lo <= hi else None


def spec_structs(spec):
    common = {c["name"]: c["fields"] for c in spec.get("commonStructs", [])}
    out = {spec["name"]: spec["fields"]}

    def walk(fields):
        for f in fields:
            ty = f["type"].removeprefix("[]")
            sub = f.get("fields") or common.get(ty)
            if sub is not None and ty not in out:
                out[ty] = sub
                walk(sub)

    walk(spec["fields"])
    return out


def spec_default(f):
    d = f.get("default")
    if isinstance(d, bool):
        return "true" if d else "false"
    if d is None:
        t = f["type"]
        if t.startswith("[]"):
            return "[]"
        if t == "records":
            return "null"  # Java's default; we choose empty, see below
        return {"string": '""', "bytes": '""', "bool": "false", "uuid": "zero"}.get(t, "0")
    if d == "":
        return '""'
    if isinstance(d, str) and d.startswith("0x"):
        return str(int(d, 16))
    try:
        return str(int(d))
    except (TypeError, ValueError):
        return d


def our_default(d, ty):
    if d is None:
        if ty.startswith("Option<"):
            return "null"
        if ty.startswith("Vec<"):
            return "[]"
        if ty in ("String", "Bytes"):
            return '""'
        if ty == "bool":
            return "false"
        if ty == "Uuid":
            return "zero"
        if re.fullmatch(r"[iuf]\d+", ty):
            return "0"
        return None  # a nested struct: its own fields are checked
    d = d.strip()
    return {
        "Some(String::new())": '""',
        "Some(Bytes::new())": '""',
        "Some(RecordSet::new())": '""',
        "Some(Vec::new())": "[]",
        "i32::MIN": "-2147483648",
        "i32::MAX": "2147483647",
        "i64::MAX": "9223372036854775807",
    }.get(d, d)


def check_field(where, o, s, window, rename, problems):
    """Compares one field over the versions in `window` (both sides define them);
    `rename` gives our name of a spec struct type."""
    sr = clip(vrange(s["versions"], window[1]), window)
    orr = clip(rust_range(o["rng"], window[1]), window)
    if sr != orr:
        problems.append(f"{where}: versions {orr}, spec {sr} (within v{window[0]}-{window[1]})")
        return
    stag = s.get("tag")
    stag = None if stag is None else int(stag)  # 3.9's BrokerHeartbeat has "tag": "0"
    if (stag is None) != (o["tag"] == "") or (stag is not None and int(o["tag"]) != stag):
        problems.append(f"{where}: tag {o['tag'] or None}, spec {stag}")
    # Where each side lets the field be null inside the window: an `Option` is nullable
    # in its `null [..]` range if it has one, else wherever the field exists.
    nv = clip(vrange(s.get("nullableVersions"), window[1]), orr)
    is_opt = o["ty"].startswith("Option<")
    ours_nv = None
    if is_opt:
        ours_nv = clip(rust_range(o["null"], window[1]), orr) if o["null"] else orr
    if nv != ours_nv:
        problems.append(f"{where}: nullable in {ours_nv} ({o['ty']} null [{o['null']}]), spec {nv}")
    st = s["type"]
    base = st.removeprefix("[]")
    base = TYPES.get(base) or rename(base)
    want = f"Vec<{base}>" if st.startswith("[]") else base
    got = o["ty"][7:-1] if is_opt else o["ty"]
    if got != want and not (st == "records" and got in RECORDS_TYPES):
        problems.append(f"{where}: type {o['ty']}, spec {st}")
    od = our_default(o["default"], o["ty"])
    sd = spec_default(s)
    # Records default to empty rather than Java's null: always safe for clients to read.
    if od is not None and od != sd and not (st == "records" and od == '""'):
        problems.append(f"{where}: default {od}, spec {sd}")


def check_message(api, kind, spec, lo, hi, flexible_from, ours, request_names, problems):
    """Compares one request or response over the versions both define; returns them."""
    svr = vrange(spec["validVersions"], 0)
    window = (max(lo, svr[0]), min(hi, svr[1]))
    if window[0] > window[1]:
        return None
    flex = vrange(spec.get("flexibleVersions"), 99)
    if (flex[0] if flex else "i16::MAX") != (
        flexible_from if flexible_from == "i16::MAX" else int(flexible_from)
    ):
        problems.append(f"{api}{kind}: flexible from {flexible_from}, spec {flex}")
    seen = set()
    for name, sfields in spec_structs(spec).items():
        rust = rust_struct_name(kind.lower(), name, request_names)
        seen.add(rust)
        if rust not in ours:
            problems.append(f"{api}{kind}: no struct {rust}")
            continue
        in_window = lambda r: clip(r, window) is not None  # noqa: E731
        sfields = [f for f in sfields if in_window(vrange(f["versions"], window[1]))]
        ofields = [f for f in ours[rust] if in_window(rust_range(f["rng"], window[1]))]
        names = [f["name"] for f in ofields]
        if names != [snake(f["name"]) for f in sfields]:
            problems.append(f"{api}{kind}.{rust}: fields {names}, spec "
                            f"{[snake(f['name']) for f in sfields]} (within v{window[0]}-{window[1]})")
            continue
        for o, s in zip(ofields, sfields):
            rename = lambda t: rust_struct_name(kind.lower(), t, request_names)  # noqa: E731
            check_field(f"{api}{kind}.{rust}.{o['name']}", o, s, window, rename, problems)
    return window, seen


def main():
    spec_dirs = sys.argv[1:]
    if not spec_dirs:
        sys.exit(__doc__)
    problems, notes = [], []
    for api in APIS:
        lo, hi, flexible_from, ours = parse_ours(os.path.join(MESSAGES, snake(api) + ".rs"))
        seen, covered = set(), {"Request": set(), "Response": set()}
        for i, spec_dir in enumerate(spec_dirs):
            request_names = set(spec_struct_names(load_spec(spec_dir, f"{api}Request")))
            for kind in ("Request", "Response"):
                spec = load_spec(spec_dir, f"{api}{kind}")
                newest = vrange(spec["validVersions"], 0)[1]
                if i == 0 and newest > hi:
                    notes.append(f"note: {api}{kind}: the spec defines up to v{newest}, we stop at v{hi}")
                r = check_message(api, kind, spec, lo, hi, flexible_from, ours, request_names, problems)
                if r is not None:
                    covered[kind].update(range(r[0][0], r[0][1] + 1))
                    seen |= r[1]
        for kind, versions in covered.items():
            missing = sorted(set(range(lo, hi + 1)) - versions)
            if missing:
                problems.append(f"{api}{kind}: no spec given defines v{missing}")
        for name in set(ours) - seen:
            problems.append(f"{api}: struct {name} is not in the spec")
    problems = list(dict.fromkeys(problems))  # two releases may report the same one
    print("\n".join(notes + problems) if notes or problems else "declarations match the spec")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
