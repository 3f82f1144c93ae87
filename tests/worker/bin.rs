//! `shmfifo-test-worker`: the worker processes of the multi-process tests (producers,
//! consumers, the log checker, a receive that dies), each mode in `roles.rs`.

mod roles;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = roles::dispatch(&args).unwrap_or_else(|| Err(format!("unknown worker mode {args:?}")));
    if let Err(e) = r {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
