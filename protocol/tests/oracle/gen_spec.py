#!/usr/bin/env python3
"""Generates spec_requests.rs and spec_responses.rs: a `fill!` table for every
kafka-protocol struct of the APIs Strata knows, taken from Apache Kafka's message JSON.

The table says, per field, in which versions it exists and in which it may be null, so
the randomised filler in fill.rs builds only values that are legal on the wire at the
version under test. It is derived from the Kafka spec, never from our own
declarations, so it cannot share their mistakes.

Usage (the JSON directory is clients/src/main/resources/common/message/ of the Kafka
release kafka-protocol was generated from; kafka-protocol 0.15 follows Kafka 3.9):

    python3 gen_spec.py /path/to/kafka/clients/src/main/resources/common/message

Writes next to this script. Run `cargo fmt` afterwards.
"""
import json
import os
import re
import sys

# The APIs Strata's codec declares, by Kafka message name prefix.
APIS = [
    "Produce", "Fetch", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch",
    "FindCoordinator", "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup",
    "DescribeGroups", "ListGroups", "SaslHandshake", "ApiVersions", "CreateTopics",
    "DeleteTopics", "DeleteRecords", "InitProducerId", "OffsetForLeaderEpoch",
    "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "WriteTxnMarkers",
    "TxnOffsetCommit", "DescribeConfigs", "AlterConfigs", "SaslAuthenticate",
    "CreatePartitions", "DeleteGroups", "IncrementalAlterConfigs", "OffsetDelete",
    "DescribeCluster", "DescribeProducers", "DescribeTransactions", "ListTransactions",
    "ElectLeaders", "AlterPartitionReassignments", "ListPartitionReassignments",
    "DescribeQuorum", "AlterPartition", "BrokerRegistration", "BrokerHeartbeat",
    "UnregisterBroker", "AllocateProducerIds",
]
# Strata's own APIs (StrataRaft, StrataMetadataFetch) have no Kafka spec and are not
# listed: their tests are in protocol/tests/private_apis.rs.

RUST_KEYWORDS = {"type", "match"}


def strip_comments(text):
    """Removes // comments outside JSON strings (the Kafka specs carry many)."""
    out, i, in_str = [], 0, False
    while i < len(text):
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
            out.append(c)
        elif text.startswith("//", i):
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def snake(name):
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s).lower()
    return "_" + s if s in RUST_KEYWORDS else s


def vrange(spec, max_version):
    """'3+' / '0-7' / '5' / 'none' -> (lo, hi) or None."""
    if spec is None or spec == "none":
        return None
    if spec.endswith("+"):
        return int(spec[:-1]), max_version
    if "-" in spec:
        lo, hi = spec.split("-")
        return int(lo), int(hi)
    return int(spec), int(spec)


def spec_struct_names(spec):
    """Every struct name a message spec declares, nested ones and common structs used."""
    structs, order = {spec["name"]: spec["fields"]}, [spec["name"]]
    common = {c["name"]: c["fields"] for c in spec.get("commonStructs", [])}
    collect(spec["fields"], structs, common, 0, order)
    return order


def rust_struct_name(kind, name, request_names):
    """Our name for the struct `name` of a request or response spec.

    Kafka names a request's and a response's structs independently (AlterPartition has
    a `TopicData` in both), but one Rust module holds both: a response struct whose name
    the request also uses is declared as `{name}Response`.
    """
    if kind == "response" and name in request_names:
        return name + "Response"
    return name


def load_spec(spec_dir, message):
    with open(os.path.join(spec_dir, message + ".json")) as fh:
        return json.loads(strip_comments(fh.read()))


def collect(fields, structs, common, max_version, order):
    """Walks a field list, recording every struct type it declares."""
    for f in fields:
        ty = f["type"].removeprefix("[]")
        sub = f.get("fields")
        if sub is None and ty in common:
            sub = common[ty]
        if sub is not None and ty not in structs:
            structs[ty] = sub
            order.append(ty)
            collect(sub, structs, common, max_version, order)


def field_line(f, max_version):
    present = vrange(f.get("versions"), max_version)
    if present is None:
        return None
    line = f"{snake(f['name'])}: {present[0]}..={present[1]}"
    nullable = vrange(f.get("nullableVersions"), max_version)
    if nullable is not None:
        line += f" null {nullable[0]}..={nullable[1]}"
    return line + ";"


def generate(spec_dir, kind):
    pairs = []
    out = [
        "// @generated by gen_spec.py from Apache Kafka's message JSON: do not edit.",
        f"//! Field versions and nullability of every {kind} struct, from the Kafka spec.",
        "",
    ]
    for api in APIS:
        msg = f"{api}{kind.capitalize()}"
        spec = load_spec(spec_dir, msg)
        request_names = set(spec_struct_names(load_spec(spec_dir, f"{api}Request")))
        max_version = vrange(spec["validVersions"], 0)[1]
        common = {c["name"]: c["fields"] for c in spec.get("commonStructs", [])}
        structs, order = {msg: spec["fields"]}, [msg]
        collect(spec["fields"], structs, common, max_version, order)
        # Messages never flexible have no tag buffer, hence no unknown_tagged_fields.
        classic = "classic " if spec.get("flexibleVersions", "none") == "none" else ""
        module = snake(msg)
        out.append(f"mod {module} {{")
        out.append(f"    use kafka_protocol::messages::{module}::*;")
        for name in order:
            pairs.append((api, module, snake(api), name, rust_struct_name(kind, name, request_names)))
            lines = [field_line(f, max_version) for f in structs[name]]
            out.append(f"    crate::fill!({classic}{name} {{")
            out.extend("        " + l for l in lines if l)
            out.append("    });")
        out.append("}")
        out.append("")
    out.append("/// Every struct above with ours of the same name, for struct-level checks.")
    out.append("pub fn visit_structs(v: &mut impl crate::apis::StructVisitor) {")
    out.append("    use kafka_protocol::messages as k;")
    out.append("    use strata_protocol::messages as s;")
    out.append("    use strata_protocol::ApiKey;")
    for api, module, ours, name, rust in pairs:
        out.append(f'    v.visit::<k::{module}::{name}, s::{ours}::{rust}>(ApiKey::{api}, "{rust}");')
    out.append("}")
    return "\n".join(out) + "\n"


def main():
    spec_dir = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    for kind in ("request", "response"):
        with open(os.path.join(here, f"spec_{kind}s.rs"), "w") as fh:
            fh.write(generate(spec_dir, kind))


if __name__ == "__main__":
    main()
