package parsley.bench;

/** What the TopologyTestDriver benchmarks share: their settings, keys and warm-up. */
final class Bench {
    private Bench() {}

    /** Records each warm-up gives a measured item, at the least. */
    static final int WARMUP_RECORDS = 200_000;

    /** The integer in the environment variable {@code name}, or {@code fallback} without one. */
    static int envInt(String name, int fallback) {
        String value = System.getenv(name);
        if (value == null) {
            return fallback;
        }
        try {
            return Integer.parseInt(value.trim());
        } catch (NumberFormatException e) {
            return fallback;
        }
    }

    /**
     * Three rounds warm the JIT at the default N, but at small N they are too
     * few records (at 20,000 a lone pattern then ran at about half speed), so
     * the default grows until each item is warmed with WARMUP_RECORDS.
     */
    static int defaultWarmup(int records) {
        if (records <= 0) {
            return 3;
        }
        return Math.max(3, (WARMUP_RECORDS + records - 1) / records);
    }

    /** The keys {@code account-0} to {@code account-(count - 1)}. */
    static String[] keys(int count) {
        String[] keys = new String[count];
        for (int key = 0; key < count; key++) {
            keys[key] = "account-" + key;
        }
        return keys;
    }
}
