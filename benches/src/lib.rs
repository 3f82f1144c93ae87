//! Helpers shared by the criterion benches (`benches/`) and the peer harness
//! (`src/bin/harness`).

/// `(voluntary, involuntary)` context switches of process `pid` so far, from `/proc`: they
/// show whether a "sleeping" receiver really slept.
pub fn ctx_switches(pid: u32) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |k: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some((
        field("voluntary_ctxt_switches:")?,
        field("nonvoluntary_ctxt_switches:")?,
    ))
}
