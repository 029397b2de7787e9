package parsley.transfers;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Writes the transfers test's input: {@code N} transfers, one a line
 * {@code id,from,to,amount,timestamp_ms}, no header. The algorithm is the one
 * README.md states, so that another implementation writes the same bytes:
 *
 * <pre>
 * rng = SplitMix64(seed)
 * for i in 0..N:
 *     lag  = rng.next() mod 10001          (unsigned)
 *     from = rng.next() mod 10
 *     to   = rng.next() mod 9;  if to >= from: to += 1
 *     line "t{i},{from},{to},1,{1700000000000 + i - lag}"
 * </pre>
 *
 * <p>Usage: {@code Generate N SEED [FILE]} (stdout without FILE or with
 * {@code -}).
 */
public final class Generate {
    static final long START_MS = 1_700_000_000_000L;
    static final long MAX_LAG_MS = 10_000;
    static final int ACCOUNTS = 10;

    /** SplitMix64 (Steele, Lea, Flood 2014), as in java.util.SplittableRandom. */
    static final class SplitMix64 {
        private long state;

        SplitMix64(long seed) {
            this.state = seed;
        }

        long next() {
            long z = (state += 0x9E3779B97F4A7C15L);
            z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
            z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
            return z ^ (z >>> 31);
        }

        /** next() as an unsigned 64-bit integer, modulo n. */
        long below(long n) {
            return Long.remainderUnsigned(next(), n);
        }
    }

    public static void main(String[] args) throws IOException {
        if (args.length < 2 || args.length > 3) {
            System.err.println("usage: Generate N SEED [FILE]");
            System.exit(2);
        }
        long n = Long.parseLong(args[0]);
        long seed = Long.parseUnsignedLong(args[1]);
        boolean toStdout = args.length == 2 || args[2].equals("-");
        try (Writer out = toStdout
                ? new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8))
                : Files.newBufferedWriter(Path.of(args[2]), StandardCharsets.UTF_8)) {
            write(n, seed, out);
        }
    }

    static void write(long n, long seed, Writer out) throws IOException {
        SplitMix64 rng = new SplitMix64(seed);
        for (long i = 0; i < n; i++) {
            long lag = rng.below(MAX_LAG_MS + 1);
            long from = rng.below(ACCOUNTS);
            long to = rng.below(ACCOUNTS - 1);
            if (to >= from) {
                to += 1;
            }
            out.write("t" + i + "," + from + "," + to + ",1," + (START_MS + i - lag) + "\n");
        }
    }
}
