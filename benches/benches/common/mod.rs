//! Settings shared by the bench targets.

use std::time::Duration;

use criterion::Criterion;

/// `--quick` or `--test` on the command line, or no `--bench` (criterion's test mode, as under
/// `cargo test --benches`), or `SHMFIFO_BENCH_QUICK` set and not `0`.
pub fn quick_mode() -> bool {
    let args: Vec<String> = std::env::args().collect();
    args.iter().any(|a| a == "--quick" || a == "--test")
        || !args.iter().any(|a| a == "--bench")
        || std::env::var("SHMFIFO_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Criterion's settings before the command line's (which win).
pub fn base_criterion(quick: bool) -> Criterion {
    let c = Criterion::default();
    if quick {
        c.sample_size(10)
            .warm_up_time(Duration::from_millis(50))
            .measurement_time(Duration::from_millis(200))
            .nresamples(10_000)
    } else {
        c
    }
}
