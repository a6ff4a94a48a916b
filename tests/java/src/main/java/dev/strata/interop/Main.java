package dev.strata.interop;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Entry point of the Java client scenarios: {@code Main GROUP BOOTSTRAP [SCENARIO...]} runs the
 * named scenarios of one group (all of them when none is named) in this one JVM, so the suite
 * pays for a JVM start per group rather than per scenario.
 *
 * <p>Each scenario asserts for itself against the real broker; its outcome is printed as one
 * line {@code RESULT {"name":..., "ok":..., "error":..., ...}} that tests/interop/java_util.py
 * parses, so each scenario is its own pytest test. Every wait is bounded (client timeouts of at
 * most 30 s, polling loops with deadlines): a request the broker never answers fails the scenario
 * instead of hanging it.
 */
public final class Main {
    /** A scenario: runs against the bootstrap address, returns extra facts for the RESULT line. */
    interface Scenario {
        Map<String, Object> run(String bootstrap) throws Exception;
    }

    private Main() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: Main producer|txn|consumer|admin|cluster-admin|paced BOOTSTRAP [SCENARIO...]");
            System.exit(2);
        }
        String group = args[0];
        String bootstrap = args[1];
        if (group.equals("paced")) {
            // Not a scenario group: a long-running producer the cluster test kills a leader under.
            Paced.run(bootstrap, Arrays.copyOfRange(args, 2, args.length));
            return;
        }
        Map<String, Scenario> all = switch (group) {
            case "producer" -> Producers.all();
            case "txn" -> Transactions.all();
            case "consumer" -> Consumers.all();
            case "admin" -> Admins.all();
            case "cluster-admin" -> ClusterAdmins.all();
            default -> throw new IllegalArgumentException("unknown group " + group);
        };
        List<String> names = args.length > 2 ? Arrays.asList(args).subList(2, args.length) : new ArrayList<>(all.keySet());
        for (String name : names) {
            Scenario s = all.get(name);
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("name", name);
            long start = System.nanoTime();
            if (s == null) {
                out.put("ok", false);
                out.put("error", "no scenario " + name + " in group " + group);
            } else {
                try {
                    Map<String, Object> facts = s.run(bootstrap);
                    out.put("ok", true);
                    if (facts != null) {
                        out.putAll(facts);
                    }
                } catch (Throwable e) {
                    out.put("ok", false);
                    out.put("error", Check.describe(e));
                    e.printStackTrace(System.err);
                }
            }
            out.put("ms", (System.nanoTime() - start) / 1_000_000);
            System.out.println("RESULT " + Json.write(out));
            System.out.flush();
        }
    }
}
