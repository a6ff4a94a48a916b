#!/usr/bin/env python3
"""Compares Strata's `message!` declarations (protocol/src/messages/*.rs) field by field
with Apache Kafka's message JSON: struct and field names in order, versions, tags,
types, nullability (including `null [..]` ranges) and defaults.

The oracle tests (cargo test --test oracle) are the main check, but they see only what
kafka-protocol knows; this also covers versions newer than it (run it against the JSON
of the newest Kafka release whose versions we declare).

Usage: python3 check_decls.py /path/to/kafka/clients/src/main/resources/common/message
Exits 1 and lists the differences if there are any.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_spec import APIS, snake, strip_comments, vrange  # noqa: E402

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


def parse_ours(path):
    src = open(path).read()
    hi = int(re.search(r"VERSIONS: \(i16, i16\) = \(\d+, (\d+)\)", src).group(1))
    flexible_from = re.search(r"FLEXIBLE_FROM: i16 = ([^;]+);", src).group(1)
    structs = {}
    for m in re.finditer(r"pub struct (\w+) \{(.*?)\n    \}", src, re.S):
        structs[m.group(1)] = [
            dict(name=f[0], ty=f[1], rng=f[2], null=f[3], tag=f[4], default=f[5] or None)
            for f in FIELD.findall(m.group(2))
        ]
    return hi, flexible_from, structs


def rust_range(r, hi):
    m = re.fullmatch(r"(\d+)\.\.(=?)(\d*)", r)
    lo = int(m.group(1))
    if not m.group(3):
        return lo, hi
    up = int(m.group(3))
    return lo, (up if m.group(2) == "=" else up - 1)


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
        "Some(Vec::new())": "[]",
        "i32::MIN": "-2147483648",
        "i32::MAX": "2147483647",
    }.get(d, d)


def check_field(where, o, s, hi, problems):
    sr = vrange(s["versions"], hi)
    sr = (sr[0], min(sr[1], hi))
    orr = rust_range(o["rng"], hi)
    orr = (orr[0], min(orr[1], hi))
    if sr != orr:
        problems.append(f"{where}: versions {orr}, spec {sr}")
    stag = s.get("tag")
    if (stag is None) != (o["tag"] == "") or (stag is not None and int(o["tag"]) != stag):
        problems.append(f"{where}: tag {o['tag'] or None}, spec {stag}")
    nv = vrange(s.get("nullableVersions"), hi)
    nv = nv and (max(nv[0], orr[0]), min(nv[1], orr[1]))
    nullable = nv is not None and nv[0] <= nv[1]
    is_opt = o["ty"].startswith("Option<")
    if nullable != is_opt:
        problems.append(f"{where}: type {o['ty']}, spec nullable in {nv}")
    partial = nullable and nv != orr
    if partial != bool(o["null"]) or (partial and rust_range(o["null"], hi) != nv):
        problems.append(f"{where}: null [{o['null']}], spec nullable only in {nv}")
    st = s["type"]
    want = f"Vec<{TYPES.get(st[2:], st[2:])}>" if st.startswith("[]") else TYPES.get(st, st)
    if (o["ty"][7:-1] if is_opt else o["ty"]) != want:
        problems.append(f"{where}: type {o['ty']}, spec {st}")
    od = our_default(o["default"], o["ty"])
    sd = spec_default(s)
    # Records default to empty rather than Java's null: always safe for clients to read.
    if od is not None and od != sd and not (st == "records" and od == '""'):
        problems.append(f"{where}: default {od}, spec {sd}")


def main():
    spec_dir = sys.argv[1]
    problems = []
    for api in APIS:
        hi, flexible_from, ours = parse_ours(os.path.join(MESSAGES, snake(api) + ".rs"))
        seen = set()
        for kind in ("Request", "Response"):
            with open(os.path.join(spec_dir, f"{api}{kind}.json")) as fh:
                spec = json.loads(strip_comments(fh.read()))
            if vrange(spec["validVersions"], 0)[1] < hi:
                problems.append(f"{api}{kind}: we declare v{hi}, the spec stops earlier")
            flex = vrange(spec.get("flexibleVersions"), 99)
            if (flex[0] if flex else "i16::MAX") != (
                flexible_from if flexible_from == "i16::MAX" else int(flexible_from)
            ):
                problems.append(f"{api}{kind}: flexible from {flexible_from}, spec {flex}")
            for name, sfields in spec_structs(spec).items():
                seen.add(name)
                if name not in ours:
                    problems.append(f"{api}{kind}: no struct {name}")
                    continue
                sfields = [f for f in sfields if (vrange(f["versions"], hi) or (hi + 1,))[0] <= hi]
                names = [f["name"] for f in ours[name]]
                if names != [snake(f["name"]) for f in sfields]:
                    problems.append(f"{api}{kind}.{name}: fields {names}, spec "
                                    f"{[snake(f['name']) for f in sfields]}")
                    continue
                for o, s in zip(ours[name], sfields):
                    check_field(f"{api}{kind}.{name}.{o['name']}", o, s, hi, problems)
        for name in set(ours) - seen:
            problems.append(f"{api}: struct {name} is not in the spec")
    print("\n".join(problems) if problems else "declarations match the spec")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
