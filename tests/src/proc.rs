//! What the kernel says about a process: CPU time and memory lines of `/proc/<pid>`.

/// CPU time (user + system, in clock ticks) of process `pid`.
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command (which may hold spaces) in parentheses: utime is the 14th field
    // of the line, the 12th after `)`.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// A `/proc/<pid>/status` field in KiB (`"VmRSS:"`, `"VmHWM:"`).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Resets the process's peak RSS to its current RSS (`clear_refs` 5), so that a later `VmHWM`
/// is the peak since now. Returns the RSS (KiB) it starts from.
pub fn reset_peak(pid: u32) -> u64 {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
    status_kib(pid, "VmHWM:")
}

/// Waits `settle`, then asserts that `pid` used at most 0.5 s of CPU (50 ticks) over the next
/// 2 s: the work that `after` names has really stopped.
pub fn assert_goes_idle(pid: u32, settle: std::time::Duration, after: &str) {
    std::thread::sleep(settle);
    let before = cpu_ticks(pid);
    std::thread::sleep(std::time::Duration::from_secs(2));
    let used = cpu_ticks(pid) - before;
    assert!(
        used <= 50,
        "seedd used {used} ticks of CPU in 2 s, {settle:?} after {after}"
    );
}
