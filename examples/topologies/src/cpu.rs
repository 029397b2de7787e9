//! CPU time as Linux's `/proc` tells it, for the benches' figures of what a
//! run was bound by.

/// The CPU time a process has used, user plus system, in clock ticks
/// (`USER_HZ`, 100 on Linux), from one line of `/proc/<pid>/stat`.
///
/// The command name (field 2) is in parentheses and may itself hold spaces
/// and parentheses, so the fields are counted after the line's *last* `)`:
/// the state (field 3) comes first, `utime` and `stime` are fields 14 and
/// 15. Fields are taken by position, whatever they hold: a process without
/// a controlling terminal (nohup, CI, a pipe) has `tty_nr` 0 and `tpgid`
/// -1, which a parse that skips what is not an unsigned number would drop,
/// shifting every later field.
pub fn process_ticks(stat: &str) -> Option<u64> {
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Field n of the line is fields[n - 3] here.
    let utime: u64 = fields.get(14 - 3)?.parse().ok()?;
    let stime: u64 = fields.get(15 - 3)?.parse().ok()?;
    Some(utime + stime)
}

/// This process's CPU time in clock ticks (`/proc/self/stat`), where Linux
/// tells it.
pub fn own_ticks() -> Option<u64> {
    process_ticks(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 29: a process with no controlling terminal (`tty_nr` 0,
    /// `tpgid` -1) and a command name holding spaces and parentheses reads
    /// its utime (1234) and stime (567), not the fields after them.
    #[test]
    fn a_stat_line_without_a_terminal_reads_utime_and_stime() {
        let line = "4242 (bench (live) x) S 1 4242 4242 0 -1 4194560 3018 0 0 0 \
                    1234 567 0 0 20 0 9 0 123456 987654321 4321 18446744073709551615 \
                    1 1 0 0 0 0 0 4096 17922 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(process_ticks(line), Some(1234 + 567));
        // The same with a terminal (tpgid a process group).
        let line = line.replace(" 0 -1 ", " 34816 4242 ");
        assert_eq!(process_ticks(&line), Some(1234 + 567));
        // A truncated or garbled line tells nothing.
        assert_eq!(process_ticks("4242 (bench) S 1 2 3"), None);
        assert_eq!(process_ticks("no parentheses"), None);
    }

    /// The running process's own line parses (on Linux).
    #[test]
    fn the_own_stat_line_parses_where_proc_exists() {
        if std::path::Path::new("/proc/self/stat").exists() {
            assert!(own_ticks().is_some());
        }
    }
}
