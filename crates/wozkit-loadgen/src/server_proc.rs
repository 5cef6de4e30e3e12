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

/// Each thread of `pid` with its name and user + system ticks so far, from
/// `/proc/PID/task/TID/stat` (threads that end between the listing and the read are skipped).
pub fn thread_ticks(pid: u32) -> Option<Vec<(u32, String, u64)>> {
    let mut out = vec![];
    for entry in fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        let Some(tid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let (Some(name), Some(ticks)) = (parse_comm(&stat), parse_cpu_ticks(&stat)) {
            out.push((tid, name, ticks));
        }
    }
    Some(out)
}

/// The command name of a `stat` line (field 2, between the first `(` and the last `)`).
fn parse_comm(stat: &str) -> Option<String> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    (close > open).then(|| stat[open + 1..close].to_string())
}

/// How one thread of the server, or threads of one name, shared the server's CPU during a
/// window.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ThreadShare {
    /// The thread's name (`tokio-runtime-w`, `sqlx-sqlite-wor`, …: the kernel keeps 15 bytes).
    pub name: String,
    /// Threads of that name (1 for a single thread).
    pub threads: usize,
    /// CPU used during the window, 100 = one core.
    pub cpu_percent: f64,
    /// Share of the whole server's CPU during the window, percent.
    pub share_percent: f64,
}

/// The busiest single thread and the CPU by thread name between two readings of
/// [`thread_ticks`] `secs` apart. A thread that started during the window counts from zero.
pub fn thread_shares(
    before: &[(u32, String, u64)],
    after: &[(u32, String, u64)],
    secs: f64,
) -> Option<(ThreadShare, Vec<ThreadShare>)> {
    let start: std::collections::HashMap<u32, u64> =
        before.iter().map(|(tid, _, t)| (*tid, *t)).collect();
    let used: Vec<(&str, u64)> = after
        .iter()
        .map(|(tid, name, t)| {
            (
                name.as_str(),
                t.saturating_sub(start.get(tid).copied().unwrap_or(0)),
            )
        })
        .collect();
    let total: u64 = used.iter().map(|(_, t)| t).sum();
    if total == 0 || secs <= 0.0 {
        return None;
    }
    let share = |name: &str, threads: usize, ticks: u64| ThreadShare {
        name: name.to_string(),
        threads,
        cpu_percent: ticks as f64 / TICKS_PER_SECOND / secs * 100.0,
        share_percent: ticks as f64 / total as f64 * 100.0,
    };
    let (busy_name, busy_ticks) = used.iter().max_by_key(|(_, t)| *t)?;
    let busiest = share(busy_name, 1, *busy_ticks);
    let mut by_name: std::collections::BTreeMap<&str, (usize, u64)> = Default::default();
    for (name, t) in &used {
        let e = by_name.entry(name).or_default();
        e.0 += 1;
        e.1 += t;
    }
    let mut groups: Vec<ThreadShare> = by_name
        .into_iter()
        .map(|(name, (n, t))| share(name, n, t))
        .filter(|g| g.share_percent >= 0.5)
        .collect();
    groups.sort_by(|a, b| b.share_percent.total_cmp(&a.share_percent));
    Some((busiest, groups))
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
    fn thread_shares_name_the_busiest_thread_and_sum_by_name() {
        let before = vec![
            (1, "wozkit".to_string(), 10),
            (2, "tokio-runtime-w".to_string(), 100),
            (3, "tokio-runtime-w".to_string(), 100),
        ];
        let after = vec![
            (1, "wozkit".to_string(), 10),
            (2, "tokio-runtime-w".to_string(), 400),
            (3, "tokio-runtime-w".to_string(), 200),
            // Started during the window.
            (4, "sqlx-sqlite-wor".to_string(), 100),
        ];
        let (busiest, groups) = thread_shares(&before, &after, 10.0).expect("shares");
        assert_eq!(busiest.name, "tokio-runtime-w");
        assert!((busiest.share_percent - 60.0).abs() < 1e-9);
        assert!((busiest.cpu_percent - 30.0).abs() < 1e-9);
        assert_eq!(groups[0].name, "tokio-runtime-w");
        assert_eq!(groups[0].threads, 2);
        assert!((groups[0].share_percent - 80.0).abs() < 1e-9);
        assert_eq!(groups[1].name, "sqlx-sqlite-wor");
        // The idle main thread is left out.
        assert_eq!(groups.len(), 2);
        assert_eq!(thread_shares(&before, &before, 10.0), None);
        let stat = "1234 (wozkit (x) y) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0";
        assert_eq!(parse_comm(stat).as_deref(), Some("wozkit (x) y"));
    }

    #[test]
    fn this_process_is_visible() {
        // Linux CI: our own figures are readable.
        let me = std::process::id();
        assert!(rss_kib(me).is_some_and(|k| k > 0));
        assert!(cpu_seconds(me).is_some());
        let threads = thread_ticks(me).expect("our threads");
        assert!(threads.iter().any(|(tid, _, _)| *tid == me));
    }
}
