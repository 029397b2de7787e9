//! Which partition a keyed emission goes to.
//!
//! Keyed records use Kafka's default partitioner (murmur2 of the key bytes), so
//! that the simulator, the test driver and a live producer agree on placement.
//! Keyless records stay on the emitting task's partition (modulo the sink's
//! partition count): deterministic, and it keeps a co-partitioned chain local.

/// Kafka's `Utils.murmur2`, bit for bit.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let length = data.len();
    let mut h: u32 = SEED ^ (length as u32);
    let chunks = data.chunks_exact(4);
    let tail = chunks.remainder();
    for chunk in chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    match tail.len() {
        3 => {
            h ^= u32::from(tail[2]) << 16;
            h ^= u32::from(tail[1]) << 8;
            h ^= u32::from(tail[0]);
            h = h.wrapping_mul(M);
        }
        2 => {
            h ^= u32::from(tail[1]) << 8;
            h ^= u32::from(tail[0]);
            h = h.wrapping_mul(M);
        }
        1 => {
            h ^= u32::from(tail[0]);
            h = h.wrapping_mul(M);
        }
        _ => {}
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of `partitions` a record with `key` goes to, when emitted by
/// the task of partition `task_partition`.
pub fn partition_for(key: Option<&[u8]>, partitions: u32, task_partition: u32) -> u32 {
    assert!(partitions > 0, "a topic has at least one partition");
    if partitions == 1 {
        // Whatever the key hashes to.
        return 0;
    }
    match key {
        Some(key) => ((murmur2(key) & 0x7fff_ffff) as u32) % partitions,
        None => task_partition % partitions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Vectors from Kafka's `UtilsTest.testMurmur2`.
    #[test]
    fn murmur2_matches_kafka() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973932308),
            (b"foobar", -790332482),
            (b"a-little-bit-long-string", -985981536),
            (b"a-little-bit-longer-string", -1486304829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58897971,
            ),
            (b"abc", 479470107),
        ];
        for (input, expected) in cases {
            assert_eq!(
                murmur2(input),
                expected,
                "{}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn keyless_records_stay_on_the_task_partition() {
        assert_eq!(partition_for(None, 4, 2), 2);
        assert_eq!(partition_for(None, 2, 3), 1);
    }
}
