"""Builds and runs the Java client scenarios of tests/java (Apache Kafka's kafka-clients, at each
version of tests/java/kafka-versions: the newest served 4.x and the oldest served 4.0.x).

The build is offline: scripts/test.sh's install step resolves each version's classpath once
(`mvn dependency:copy-dependencies`); here the same goal runs with `mvn -o` into a tmp dir, so a
missing artifact fails the build instead of being fetched at test time. The sources are compiled
once with javac against the newest classpath and run against each version's (the scenarios run on
the oldest version use only API that 4.0 has).

One JVM runs one group of scenarios (`Main GROUP BOOTSTRAP [NAMES...]`), each of which prints
`RESULT {json}` with `ok` and, on failure, `error`; a small heap and the C1 compiler only keep a
JVM start cheap on a shared 2-core machine."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

JAVA_DIR = Path(__file__).parent.parent / "java"
MAIN = "dev.strata.interop.Main"
JVM_FLAGS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.logFile=System.err"]


def versions() -> list[str]:
    """kafka-clients versions, newest first (tests/java/kafka-versions)."""
    out = [line.strip() for line in (JAVA_DIR / "kafka-versions").read_text().splitlines()
           if line.strip() and not line.startswith("#")]
    assert len(out) >= 2, out
    return out


NEWEST, OLDEST = versions()[0], versions()[-1]


class JavaClients:
    """The compiled scenarios and one classpath per kafka-clients version."""

    def __init__(self, out_dir: Path):
        self.out_dir = out_dir
        self.classes = out_dir / "classes"
        self.libs: dict[str, Path] = {}

    def build(self) -> "JavaClients":
        for tool in ("mvn", "javac", "java"):
            assert shutil.which(tool), f"{tool} not on PATH: the Java tests need a JDK 17+ and Maven"
        for v in versions():
            lib = self.out_dir / f"lib-{v}"
            r = subprocess.run(["mvn", "-o", "-q", "-B", "-Dstyle.color=never", "dependency:copy-dependencies", f"-Dkafka.version={v}",
                                f"-DoutputDirectory={lib}"], cwd=JAVA_DIR, capture_output=True, text=True,
                               timeout=300)
            assert r.returncode == 0, (f"mvn -o could not copy kafka-clients {v}'s classpath; run scripts/test.sh's "
                                       f"install step:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
            self.libs[v] = lib
        sources = sorted(str(p) for p in (JAVA_DIR / "src" / "main" / "java").rglob("*.java"))
        r = subprocess.run(["javac", "--release", "17", "-d", str(self.classes), "-cp", f"{self.libs[NEWEST]}/*",
                            *sources], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"javac failed:\n{r.stderr[-3000:]}"
        return self

    def command(self, version: str, *args: str, props: dict[str, str] | None = None) -> list[str]:
        """The java command line running Main with `args`; `props` become -D system properties."""
        cp = os.pathsep.join([str(self.classes), f"{self.libs[version]}/*"])
        return ["java", *JVM_FLAGS, *(f"-D{k}={v}" for k, v in (props or {}).items()), "-cp", cp, MAIN, *args]

    def run(self, version: str, group: str, bootstrap: str, *names: str, timeout: float = 400,
            props: dict[str, str] | None = None) -> dict[str, dict]:
        """Runs scenarios of `group` in one JVM; returns name -> RESULT of each. A JVM that dies or
        prints no RESULT for a scenario yields a failed result carrying its stderr's tail."""
        r = subprocess.run(self.command(version, group, bootstrap, *names, props=props), capture_output=True,
                           text=True, timeout=timeout)
        results = {}
        for line in r.stdout.splitlines():
            if line.startswith("RESULT "):
                res = json.loads(line[len("RESULT "):])
                res["stderr"] = r.stderr[-4000:]
                results[res["name"]] = res
        for n in names:
            if n not in results:
                results[n] = {"name": n, "ok": False, "error": f"no RESULT (exit {r.returncode})",
                              "stderr": r.stderr[-4000:]}
        return results


def assert_ok(res: dict) -> None:
    assert res["ok"], f"{res['name']}: {res.get('error')}\n--- JVM stderr (tail) ---\n{res.get('stderr', '')[-3000:]}"
