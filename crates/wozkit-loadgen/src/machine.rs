//! Was the machine quiet during the measurement window? Read from Linux's `/proc/stat` (the
//! whole machine's CPU time by kind) and `/proc/PID/stat` (the load generator's and the server's
//! own CPU time) at the start and at the end of the window. From the differences:
//!
//! - **foreign CPU**: user, nice and system time of the machine that neither the load generator nor
//!   the server used (builds, other tests, anything else), as a share of one core;
//! - **steal**: time the hypervisor gave this VM's vCPUs to someone else, as a share of all the
//!   machine's CPU time;
//! - **iowait**: idle time with disk I/O outstanding (shown, never warned about: the server's own
//!   fsyncs cause it).
//!
//! Interrupt and softirq time is left out of the foreign share: loopback networking between the
//! load generator and the server is accounted there rather than to either process.
//!
//! The arithmetic works on snapshots only ([`CpuTimes`], [`Snapshot`]), so it is tested on fixed
//! `/proc/stat` text. Anywhere `/proc/stat` cannot be read (another OS, no permission) there are no
//! figures and the report says "not measured".

use std::fs;

use serde::Serialize;

use crate::server_proc;

/// Foreign CPU above this share of one core (percent, averaged over the window) makes the
/// figures not comparable.
pub const FOREIGN_LIMIT_PERCENT: f64 = 10.0;
/// Steal above this share of the machine's CPU time (percent) makes the figures not comparable.
pub const STEAL_LIMIT_PERCENT: f64 = 2.0;

/// The aggregate `cpu` line of `/proc/stat`, in clock ticks since boot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuTimes {
    /// Every tick of every CPU (guest time is already inside user and nice).
    fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
    }

    /// Ticks spent running processes: user, nice and system.
    fn process(&self) -> u64 {
        self.user + self.nice + self.system
    }

    /// Field-wise `self − earlier`, saturating (a counter never goes back; a damaged read must not
    /// give huge figures).
    fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            user: self.user.saturating_sub(earlier.user),
            nice: self.nice.saturating_sub(earlier.nice),
            system: self.system.saturating_sub(earlier.system),
            idle: self.idle.saturating_sub(earlier.idle),
            iowait: self.iowait.saturating_sub(earlier.iowait),
            irq: self.irq.saturating_sub(earlier.irq),
            softirq: self.softirq.saturating_sub(earlier.softirq),
            steal: self.steal.saturating_sub(earlier.steal),
        }
    }
}

/// The machine's CPU times and the number of CPUs, from the text of `/proc/stat`. Kernels older
/// than 2.6.11 have no steal column; it then counts as zero.
pub fn parse_proc_stat(text: &str) -> Option<(CpuTimes, usize)> {
    let mut times = None;
    let mut cpus = 0;
    for line in text.lines() {
        let mut cols = line.split_whitespace();
        match cols.next() {
            Some("cpu") => {
                let v: Vec<u64> = cols.map_while(|c| c.parse().ok()).collect();
                if v.len() < 7 {
                    return None;
                }
                times = Some(CpuTimes {
                    user: v[0],
                    nice: v[1],
                    system: v[2],
                    idle: v[3],
                    iowait: v[4],
                    irq: v[5],
                    softirq: v[6],
                    steal: v.get(7).copied().unwrap_or(0),
                });
            }
            Some(name) if name.starts_with("cpu") && name[3..].parse::<u32>().is_ok() => cpus += 1,
            _ => {}
        }
    }
    Some((times?, cpus.max(1)))
}

/// The CPU counters at one instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub machine: CpuTimes,
    pub cpus: usize,
    /// The load generator's user + system ticks.
    pub own_ticks: Option<u64>,
    /// The server's user + system ticks, when its process is known.
    pub server_ticks: Option<u64>,
}

impl Snapshot {
    /// Reads `/proc/stat`, `/proc/self/stat` and, given a PID, the server's `/proc/PID/stat`.
    /// `None` where `/proc/stat` is not readable (not Linux).
    pub fn read(server_pid: Option<u32>) -> Option<Snapshot> {
        if !cfg!(target_os = "linux") {
            return None;
        }
        let (machine, cpus) = parse_proc_stat(&fs::read_to_string("/proc/stat").ok()?)?;
        let own = std::process::id();
        Some(Snapshot {
            machine,
            cpus,
            own_ticks: server_proc::cpu_ticks(own),
            // A server inside this process (tests) is already counted as the load generator.
            server_ticks: match server_pid {
                Some(pid) if pid == own => Some(0),
                Some(pid) => server_proc::cpu_ticks(pid),
                None => None,
            },
        })
    }
}

/// How busy the machine was with other things during the window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MachineFigures {
    /// CPUs the kernel counts.
    pub cpus: usize,
    /// Everything that ran on the machine, processes and interrupts (100 = one core).
    pub busy_cpu_percent: f64,
    /// User, nice and system time neither the load generator nor the server used (100 = one
    /// core); `None` when the server's process is unknown (it would count as foreign).
    pub foreign_cpu_percent: Option<f64>,
    /// The load generator's own CPU (100 = one core).
    pub loadgen_cpu_percent: Option<f64>,
    /// Steal as a share of all the machine's CPU time, percent.
    pub steal_percent: f64,
    /// Iowait as a share of all the machine's CPU time, percent.
    pub iowait_percent: f64,
    /// True when foreign CPU was measured and it and steal stayed under their limits.
    pub quiet: bool,
    /// Why the machine was not quiet (empty when it was).
    pub warnings: Vec<String>,
}

/// The figures for the window between two snapshots; `None` when no time passed.
pub fn figures(start: &Snapshot, end: &Snapshot) -> Option<MachineFigures> {
    let d = end.machine.since(&start.machine);
    let total = d.total();
    if total == 0 {
        return None;
    }
    let cpus = end.cpus.max(1);
    // Ticks one core had during the window.
    let per_core = total as f64 / cpus as f64;
    let of_core = |ticks: u64| ticks as f64 / per_core * 100.0;
    let of_all = |ticks: u64| ticks as f64 / total as f64 * 100.0;
    let delta = |a: Option<u64>, b: Option<u64>| Some(b?.saturating_sub(a?));
    let own = delta(start.own_ticks, end.own_ticks);
    let server = delta(start.server_ticks, end.server_ticks);
    let foreign = own
        .zip(server)
        .map(|(o, s)| of_core(d.process().saturating_sub(o + s)));
    let steal = of_all(d.steal);
    let mut warnings = vec![];
    if let Some(f) = foreign.filter(|f| *f > FOREIGN_LIMIT_PERCENT) {
        warnings.push(format!(
            "other processes used {f:.0}% of a core on average (limit {FOREIGN_LIMIT_PERCENT:.0}%)"
        ));
    }
    if foreign.is_none() {
        // Unknown is not quiet: the servers' CPU cannot be told from other processes' CPU.
        warnings.push(
            "other processes' CPU was not measured: the server's process is unknown (with several URLs, or without --server-pid)"
                .to_string(),
        );
    }
    if steal > STEAL_LIMIT_PERCENT {
        warnings.push(format!(
            "the hypervisor stole {steal:.1}% of the CPU time (limit {STEAL_LIMIT_PERCENT:.0}%)"
        ));
    }
    Some(MachineFigures {
        cpus,
        busy_cpu_percent: of_core(total - d.idle - d.iowait - d.steal),
        foreign_cpu_percent: foreign,
        loadgen_cpu_percent: own.map(of_core),
        steal_percent: steal,
        iowait_percent: of_all(d.iowait),
        quiet: warnings.is_empty(),
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: &str = "cpu  1000 10 500 8000 40 5 20 0 0 0\n\
cpu0 500 5 250 4000 20 3 10 0 0 0\n\
cpu1 500 5 250 4000 20 2 10 0 0 0\n\
intr 123456 0 0\n\
ctxt 999\n\
btime 1700000000\n\
procs_running 2\n";

    fn snap(text: &str, own: u64, server: u64) -> Snapshot {
        let (machine, cpus) = parse_proc_stat(text).expect("parses");
        Snapshot {
            machine,
            cpus,
            own_ticks: Some(own),
            server_ticks: Some(server),
        }
    }

    #[test]
    fn the_cpu_line_and_the_cpu_count_are_read() {
        let (t, cpus) = parse_proc_stat(START).unwrap();
        assert_eq!(cpus, 2);
        assert_eq!(
            t,
            CpuTimes {
                user: 1000,
                nice: 10,
                system: 500,
                idle: 8000,
                iowait: 40,
                irq: 5,
                softirq: 20,
                steal: 0,
            }
        );
        // An old kernel without the steal column.
        let (old, n) = parse_proc_stat("cpu 1 2 3 4 5 6 7\n").unwrap();
        assert_eq!((old.softirq, old.steal, n), (7, 0, 1));
        assert_eq!(parse_proc_stat("intr 1 2\n"), None);
        assert_eq!(parse_proc_stat("cpu 1 2 3\n"), None);
    }

    #[test]
    fn a_quiet_window_has_no_warning() {
        // 10 s on 2 CPUs = 2000 ticks: the server 1200 (120 %), the generator 300 (30 %),
        // others 50 (5 %), interrupts 100, iowait 50, idle 300.
        let end = "cpu  2400 10 650 8300 90 45 80 0 0 0\ncpu0 0\ncpu1 0\n";
        let f = figures(&snap(START, 100, 5000), &snap(end, 400, 6200)).unwrap();
        assert_eq!(f.cpus, 2);
        assert!((f.foreign_cpu_percent.unwrap() - 5.0).abs() < 1e-9);
        assert!((f.loadgen_cpu_percent.unwrap() - 30.0).abs() < 1e-9);
        assert!((f.busy_cpu_percent - 165.0).abs() < 1e-9);
        assert!((f.iowait_percent - 2.5).abs() < 1e-9);
        assert_eq!(f.steal_percent, 0.0);
        assert!(f.quiet);
        assert!(f.warnings.is_empty());
    }

    #[test]
    fn foreign_cpu_and_steal_are_warned_about() {
        // 2000 ticks again: processes 1700 of which the server 1200 and the generator 300, so
        // others 200 (20 % of a core); steal 100 (5 % of the machine).
        let end = "cpu  2400 10 800 8200 40 5 20 100 0 0\ncpu0 0\ncpu1 0\n";
        let f = figures(&snap(START, 100, 5000), &snap(end, 400, 6200)).unwrap();
        assert!((f.foreign_cpu_percent.unwrap() - 20.0).abs() < 1e-9);
        assert!((f.steal_percent - 5.0).abs() < 1e-9);
        assert!(!f.quiet);
        assert_eq!(f.warnings.len(), 2);
        assert!(f.warnings[0].contains("20%"), "{:?}", f.warnings);
        assert!(f.warnings[1].contains("5.0%"), "{:?}", f.warnings);
    }

    #[test]
    fn without_the_server_process_foreign_cpu_is_unknown() {
        let end = "cpu  2400 10 800 8200 40 5 20 100 0 0\ncpu0 0\ncpu1 0\n";
        let mut start = snap(START, 100, 5000);
        let mut stop = snap(end, 400, 6200);
        start.server_ticks = None;
        stop.server_ticks = None;
        let f = figures(&start, &stop).unwrap();
        assert_eq!(f.foreign_cpu_percent, None);
        // Not knowing is not quiet; steal is still checked.
        assert!(!f.quiet);
        assert_eq!(f.warnings.len(), 2, "{:?}", f.warnings);
        assert!(f.warnings[0].contains("not measured"), "{:?}", f.warnings);
        assert!(f.warnings[1].contains("stole"), "{:?}", f.warnings);
    }

    #[test]
    fn no_elapsed_time_gives_no_figures() {
        assert_eq!(figures(&snap(START, 1, 1), &snap(START, 1, 1)), None);
    }

    #[test]
    fn this_machine_can_be_read_on_linux() {
        if cfg!(target_os = "linux") {
            let s = Snapshot::read(Some(std::process::id())).expect("/proc/stat is readable");
            assert!(s.cpus >= 1);
            assert!(s.own_ticks.is_some() && s.server_ticks.is_some());
        } else {
            assert_eq!(Snapshot::read(None), None);
        }
    }
}
