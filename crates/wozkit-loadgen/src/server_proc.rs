//! The server process seen from outside, through Linux's `/proc`: which process listens on the
//! target port, its resident memory (`VmRSS`) and the CPU time it used. Nothing here is needed
//! for the run itself; when `/proc` says nothing (another OS, no permission) the report simply
//! has no memory figures.

use std::fs;

/// Linux reports CPU times in clock ticks of `USER_HZ`, which is 100 on every mainstream
/// architecture.
const TICKS_PER_SECOND: f64 = 100.0;

/// The process that has a socket listening on TCP `port` (IPv4 or IPv6), if `/proc` says.
pub fn pid_listening_on(port: u16) -> Option<u32> {
    let mut inodes = vec![];
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if let Ok(text) = fs::read_to_string(table) {
            inodes.extend(listening_inodes(&text, port));
        }
    }
    if inodes.is_empty() {
        return None;
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    for entry in fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(link) = fs::read_link(fd.path())
                && link.to_str().is_some_and(|l| wanted.iter().any(|w| w == l))
            {
                return Some(pid);
            }
        }
    }
    None
}

/// Inodes of the sockets in state LISTEN (`0A`) on `port` in a `/proc/net/tcp{,6}` table.
fn listening_inodes(table: &str, port: u16) -> Vec<u64> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let local = cols.get(1)?;
            let state = cols.get(3)?;
            let inode = cols.get(9)?.parse::<u64>().ok()?;
            let local_port = u16::from_str_radix(local.rsplit_once(':')?.1, 16).ok()?;
            (*state == "0A" && local_port == port && inode != 0).then_some(inode)
        })
        .collect()
}

/// Resident memory of `pid` in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    parse_vmrss(&fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
}

fn parse_vmrss(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// User + system CPU seconds `pid` has used so far.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    cpu_ticks(pid).map(|t| t as f64 / TICKS_PER_SECOND)
}

/// User + system CPU time `pid` has used so far, in clock ticks (`USER_HZ`, the unit of
/// `/proc/stat`).
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    parse_cpu_ticks(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may hold spaces: count from after it.
    // utime and stime are fields 14 and 15, i.e. the 12th and 13th after the name.
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_sockets_are_found_by_port() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0\n\
   1: 0100007F:1F90 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 20 4 30 10 -1\n\
   2: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 99 1 0000000000000000 100 0 0 10 0\n";
        assert_eq!(listening_inodes(table, 8080), vec![4242]);
        assert_eq!(listening_inodes(table, 22), vec![99]);
        assert!(listening_inodes(table, 9).is_empty());
    }

    #[test]
    fn status_and_stat_are_read() {
        assert_eq!(
            parse_vmrss("Name:\twozkit\nVmPeak:\t 100 kB\nVmRSS:\t   51234 kB\n"),
            Some(51234)
        );
        assert_eq!(parse_vmrss("Name: x\n"), None);
        let stat = "1234 (wozkit (x) y) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0";
        assert_eq!(parse_cpu_ticks(stat), Some(300));
    }

    #[test]
    fn this_process_is_visible() {
        // Linux CI: our own figures are readable.
        let me = std::process::id();
        assert!(rss_kib(me).is_some_and(|k| k > 0));
        assert!(cpu_seconds(me).is_some());
    }
}
