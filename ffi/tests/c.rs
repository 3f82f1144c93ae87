//! Installs the built C library with `ffi/install.sh` (as a user or a distribution would), builds
//! the C tests and examples with the system C compiler against that installed copy (its header,
//! its versioned `libshmfifo.so`), and runs them:
//!
//! * the install itself: SONAME and versioned links, a stripped library with split-off debug
//!   info, DESTDIR staging, the pkg-config file; finding the built library through
//!   CARGO_TARGET_DIR or cargo's own answer, and without cargo (as under sudo);
//! * linking against the build tree as ffi/README.md says (the SONAME link and an rpath, or
//!   the static library);
//! * `test_ffi.c`: every function and every provokable result code, also under valgrind
//!   (memcheck, leaks) with no error;
//! * C producer processes → a Rust consumer, and a Rust producer → C consumer processes:
//!   per-group order and exactly-once deletion;
//! * the Python ctypes example sending, received in Rust and in C.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use shmfifo_core::{Queue, QueueConfig, ReceiveOptions, SendMessage};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `target/<profile>`, where cargo put `libshmfifo.so` (this binary is in its `deps/`).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
    assert!(
        dir.join("libshmfifo.so").exists(),
        "libshmfifo.so not found in {}: run `cargo build -p shmfifo-ffi` first \
         (`bash ci/test-all.sh` does)",
        dir.display()
    );
    dir
}

/// Runs `ffi/install.sh` with `env` and PREFIX `prefix`, from the built library.
fn install(prefix: &Path, env: &[(&str, &Path)]) {
    let mut c = Command::new("bash");
    c.arg(root().join("install.sh")).arg(prefix).arg(lib_dir());
    for (k, v) in env {
        c.env(k, v);
    }
    let st = c.status().unwrap();
    assert!(st.success(), "install.sh failed");
}

/// The installed copy every C program here is built against (installed once per run).
fn installed() -> &'static Path {
    static PREFIX: OnceLock<PathBuf> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let prefix = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("prefix");
        let _ = std::fs::remove_dir_all(&prefix);
        install(&prefix, &[]);
        prefix
    })
}

/// Compiles one C file into an executable under the test's scratch directory, against the
/// installed header and library.
fn compile(src: &str, out: &str) -> PathBuf {
    let prefix = installed();
    let lib = prefix.join("lib");
    let exe = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(out);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(&cc)
        .args([
            "-std=c11",
            "-D_DEFAULT_SOURCE",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-g",
            "-pthread",
        ])
        .arg("-I")
        .arg(prefix.join("include"))
        .arg(root().join(src))
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lshmfifo")
        .arg("-o")
        .arg(&exe)
        .status()
        .unwrap_or_else(|e| panic!("running the C compiler {cc}: {e}"));
    assert!(st.success(), "compiling {src} failed");
    exe
}

fn unique(tag: &str) -> String {
    format!(
        "shmfifo-ctest-{}-{tag}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    )
}

struct Named(String);
impl Drop for Named {
    fn drop(&mut self) {
        let _ = Queue::unlink(&self.0);
        let _ = std::fs::remove_file(format!("/dev/shm/{}.done", self.0));
    }
}

fn queue(tag: &str) -> (Named, Queue) {
    let name = unique(tag);
    let q = Queue::create(
        &name,
        &QueueConfig::new()
            .max_messages(4096)
            .max_groups(256)
            .dedup_entries(16_384),
    )
    .expect("create");
    (Named(name), q)
}

#[test]
fn c_test_suite_passes_and_is_clean_under_valgrind() {
    let exe = compile("tests/test_ffi.c", "test_ffi");
    let scratch = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ffi-scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let out = Command::new(&exe).arg(&scratch).output().unwrap();
    assert!(
        out.status.success(),
        "test_ffi failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new("valgrind")
        .args([
            "-q",
            "--leak-check=full",
            "--errors-for-leak-kinds=definite,indirect",
            "--error-exitcode=9",
        ])
        .arg(&exe)
        .arg(&scratch)
        .output()
        .expect("valgrind must be installed (apt-get install valgrind)");
    assert!(
        out.status.success(),
        "test_ffi under valgrind: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A library call from an `atexit` handler: glibc has destroyed the thread's locals by then,
/// and the last-error message the call clears (or sets) was one of them: the process aborted
/// (a panic inside an `extern "C"` function) where the call should simply work.
#[test]
fn a_call_from_an_atexit_handler_works() {
    let exe = compile("tests/at_exit.c", "at_exit");
    let name = unique("atexit");
    let _named = Named(name.clone());
    let out = Command::new(&exe).arg(&name).output().unwrap();
    assert!(
        out.status.success(),
        "at_exit: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "cleanup unlinked 0 again-refused\n"
    );
}

/// Receives and deletes until `want` messages came, checking per-group order (one consumer,
/// long visibility: each group's bodies arrive with k = 0, 1, 2, …). Returns the count.
fn consume_in_rust(q: &Queue, want: usize) -> HashMap<String, u64> {
    let mut next: HashMap<String, u64> = HashMap::new();
    let mut got = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    let opts = ReceiveOptions::max(10)
        .visibility_timeout(Duration::from_secs(60))
        .wait(Duration::from_millis(200));
    while got < want {
        assert!(
            Instant::now() < deadline,
            "only {got} of {want} messages came"
        );
        for m in q.receive(&opts).unwrap() {
            let (group, k) = m.body.rsplit_once(':').unwrap();
            assert_eq!(group, m.group_id);
            let k: u64 = k.parse().unwrap();
            let e = next.entry(group.to_owned()).or_insert(0);
            assert_eq!(k, *e, "group {group}: per-group order (and no duplicate)");
            *e += 1;
            q.delete(&m.receipt_handle).unwrap();
            got += 1;
        }
    }
    next
}

#[test]
fn c_producers_rust_consumer() {
    let exe = compile("examples/producer.c", "producer");
    let (name, q) = queue("c2r");
    let producers: Vec<_> = (0..2)
        .map(|id| {
            Command::new(&exe)
                .args([&name.0, &id.to_string(), "20", "2000"])
                .spawn()
                .unwrap()
        })
        .collect();
    let counts = consume_in_rust(&q, 4000);
    for mut p in producers {
        assert!(p.wait().unwrap().success());
    }
    assert_eq!(counts.len(), 40);
    assert!(counts.values().all(|&n| n == 100));
    assert!(q.receive(&ReceiveOptions::max(10)).unwrap().is_empty());
}

/// What the logs say of one message.
#[derive(Default, Clone, Copy)]
struct Seen {
    recv: u64,
    del: u64,
    deletes: u32,
    log: usize,
    line: usize,
}

/// Checks consumer logs: every message of `groups` deleted exactly once; within a group,
/// message k+1 was received after k was deleted, or in the same receive (same consumer, same
/// batch), after it in the batch (R3, R5).
fn check_consumer_logs(logs: &[String], groups: &[(String, u64)]) {
    let mut seen: HashMap<String, Seen> = HashMap::new();
    for (li, log) in logs.iter().enumerate() {
        for (n, line) in log.lines().enumerate() {
            let mut w = line.split(' ');
            let (kind, body, t) = (w.next().unwrap(), w.next().unwrap(), w.next().unwrap());
            let t: u64 = t.parse().unwrap();
            let e = seen.entry(body.to_owned()).or_default();
            match kind {
                "RECV" => {
                    e.recv = t;
                    e.log = li;
                    e.line = n;
                }
                "DEL" => {
                    e.del = t;
                    e.deletes += 1;
                }
                _ => panic!("bad log line {line}"),
            }
        }
    }
    for (group, n) in groups {
        for k in 0..*n {
            let body = format!("{group}:{k}");
            let e = *seen
                .get(&body)
                .unwrap_or_else(|| panic!("{body} never deleted"));
            assert_eq!(e.deletes, 1, "{body} deleted exactly once");
            if k + 1 < *n {
                let next = seen[&format!("{group}:{}", k + 1)];
                let same_batch = next.log == e.log && next.recv == e.recv;
                assert!(
                    if same_batch {
                        next.line > e.line
                    } else {
                        next.recv >= e.del
                    },
                    "{group}: message {} received before {k} was deleted",
                    k + 1
                );
            }
        }
    }
}

#[test]
fn rust_producer_c_consumers() {
    let exe = compile("examples/consumer.c", "consumer");
    let (name, q) = queue("r2c");
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            Command::new(&exe)
                .arg(&name.0)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let groups: Vec<(String, u64)> = (0..20).map(|j| (format!("r-g{j}"), 150)).collect();
    for k in 0..150 {
        for (g, _) in &groups {
            let body = format!("{g}:{k}");
            q.send(&SendMessage::new(g, &body).dedup_id(&body)).unwrap();
        }
    }
    std::fs::write(format!("/dev/shm/{}.done", name.0), b"").unwrap();
    // Each consumer's output read on its own thread: a consumer blocked on a full pipe would
    // hold its messages in flight while the other waits for the queue to empty.
    let readers: Vec<_> = consumers
        .into_iter()
        .map(|c| std::thread::spawn(move || c.wait_with_output().unwrap()))
        .collect();
    let logs: Vec<String> = readers
        .into_iter()
        .map(|r| {
            let out = r.join().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        })
        .collect();
    assert!(logs.iter().all(|l| !l.is_empty()), "both consumers worked");
    check_consumer_logs(&logs, &groups);
}

/// Runs the Python example; returns its report line.
fn python(queue: &str, n: u32) -> String {
    let lib = lib_dir().join("libshmfifo.so");
    let out = Command::new("python3")
        .arg(root().join("examples/python/send.py"))
        .args([queue, &n.to_string()])
        .env("SHMFIFO_LIB", &lib)
        .output()
        .expect("python3 must be installed");
    assert!(
        out.status.success(),
        "send.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn python_sends_rust_and_c_receive() {
    let (name, q) = queue("py");
    assert_eq!(python(&name.0, 400), "sent 400, duplicates 0");
    let counts = consume_in_rust(&q, 400);
    assert_eq!(counts.len(), 4);
    let exe = compile("examples/consumer.c", "consumer_py");
    // The same bodies, hence the same dedup ids, within the interval: duplicates (D1).
    assert_eq!(python(&name.0, 200), "sent 200, duplicates 200");
    assert!(q.receive(&ReceiveOptions::max(10)).unwrap().is_empty());
    drop(q);
    let _ = Queue::unlink(&name.0);
    let (name, q) = queue("py2");
    assert_eq!(python(&name.0, 200), "sent 200, duplicates 0");
    std::fs::write(format!("/dev/shm/{}.done", name.0), b"").unwrap();
    let out = Command::new(&exe).arg(&name.0).output().unwrap();
    assert!(out.status.success());
    let log = String::from_utf8(out.stdout).unwrap();
    let groups: Vec<(String, u64)> = (0..4).map(|j| (format!("py-g{j}"), 50)).collect();
    check_consumer_logs(&[log], &groups);
    drop(q);
}

/// The documented install step and pkg-config line build a program, which runs against the
/// installed library (found through its SONAME link, `libshmfifo.so.0`).
#[test]
fn install_and_pkg_config() {
    let prefix = installed();
    let pc = Command::new("pkg-config")
        .args(["--cflags", "--libs", "shmfifo"])
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
        .output()
        .expect("pkg-config must be installed");
    assert!(pc.status.success());
    let flags = String::from_utf8(pc.stdout).unwrap().trim().to_owned();
    assert_eq!(
        flags,
        format!("-I{0}/include -L{0}/lib -lshmfifo", prefix.display())
    );
    let exe = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("producer_pc");
    let st = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "cc -std=c11 -D_DEFAULT_SOURCE {} $0 {flags} -o {}",
            "-Wall -Werror",
            exe.display()
        ))
        .arg(root().join("examples/producer.c"))
        .status()
        .unwrap();
    assert!(st.success(), "cc with pkg-config flags failed");
    let needed = readelf(&exe, "-d");
    assert!(
        needed.contains("Shared library: [libshmfifo.so.0]"),
        "the program records the SONAME: {needed}"
    );
    let (name, q) = queue("pc");
    let st = Command::new(&exe)
        .args([&name.0, "0", "2", "10"])
        .env("LD_LIBRARY_PATH", prefix.join("lib"))
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(consume_in_rust(&q, 10).len(), 2);
}

fn readelf(file: &Path, what: &str) -> String {
    let out = Command::new("readelf")
        .arg(what)
        .arg(file)
        .output()
        .expect("readelf (binutils) must be installed");
    assert!(out.status.success(), "readelf {what} {}", file.display());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The install lays the library out as distributions do: under DESTDIR (the .pc
/// file still says PREFIX), `libshmfifo.so.X.Y.Z` with SONAME `libshmfifo.so.X`, the two
/// links, the library stripped with a debuglink to its split-off debug info, the static
/// library, the header.
#[test]
fn install_is_laid_out_as_distributions_expect() {
    let stage = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("stage");
    let _ = std::fs::remove_dir_all(&stage);
    let debug = Path::new("/usr/lib/debug/usr/lib/x86_64-linux-gnu");
    install(
        Path::new("/usr"),
        &[
            ("DESTDIR", &stage),
            ("LIBDIR", Path::new("/usr/lib/x86_64-linux-gnu")),
            ("DEBUGDIR", debug),
        ],
    );
    let version = env!("CARGO_PKG_VERSION");
    let major = env!("CARGO_PKG_VERSION_MAJOR");
    let lib = stage.join("usr/lib/x86_64-linux-gnu");
    let real = format!("libshmfifo.so.{version}");
    let soname = format!("libshmfifo.so.{major}");
    let link = |p: &str| std::fs::read_link(lib.join(p)).unwrap();
    assert_eq!(link(&soname), PathBuf::from(&real));
    assert_eq!(link("libshmfifo.so"), PathBuf::from(&soname));
    let so = lib.join(&real);
    assert!(readelf(&so, "-d").contains(&format!("Library soname: [{soname}]")));
    let sections = readelf(&so, "-S");
    assert!(!sections.contains(".debug_info"), "stripped");
    assert!(
        !sections.contains(" .symtab"),
        "stripped of its static symbols"
    );
    assert!(
        sections.contains(".gnu_debuglink"),
        "links to its debug info"
    );
    let dbg = stage
        .join(debug.strip_prefix("/").unwrap())
        .join(format!("{real}.debug"));
    assert!(
        readelf(&dbg, "-S").contains(".debug_info"),
        "the split-off debug info"
    );
    // The exported C ABI survives stripping.
    assert!(readelf(&so, "--dyn-syms").contains("shmfifo_send_timeout"));
    assert!(lib.join("libshmfifo.a").is_file());
    assert!(stage.join("usr/include/shmfifo.h").is_file());
    let pc = std::fs::read_to_string(lib.join("pkgconfig/shmfifo.pc")).unwrap();
    assert!(
        pc.starts_with("prefix=/usr\nlibdir=/usr/lib/x86_64-linux-gnu\n"),
        "{pc}"
    );
    assert!(
        !pc.contains(stage.to_str().unwrap()),
        "DESTDIR is not recorded"
    );
    assert!(pc.contains(&format!("Version: {version}")));
}

/// The header also compiles as C++ (extern "C" guards, no C-only constructs).
#[test]
fn header_compiles_as_cpp() {
    let src = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("header.cpp");
    std::fs::write(
        &src,
        "#include \"shmfifo.h\"\nint main() { shmfifo_config c = shmfifo_config_default(); return (int)c.mode == 0; }\n",
    )
    .unwrap();
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let st = Command::new(&cxx)
        .args(["-std=c++11", "-Wall", "-Werror", "-fsyntax-only", "-I"])
        .arg(root().join("include"))
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("running the C++ compiler {cxx}: {e}"));
    assert!(st.success(), "shmfifo.h does not compile as C++");
}

/// A scratch directory of its own under the test's temporary directory (emptied first).
fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A cargo target directory holding a fresh copy of the built library in `release/`, as
/// `cargo build --release -p shmfifo-ffi` leaves it (copies: newer than every source).
fn fake_target(dir: &Path) {
    let rel = dir.join("release");
    std::fs::create_dir_all(&rel).unwrap();
    for f in ["libshmfifo.so", "libshmfifo.a"] {
        std::fs::copy(lib_dir().join(f), rel.join(f)).unwrap();
    }
}

/// A PATH directory with only the programs `install.sh` runs (no cargo, no rustup), as root's
/// PATH under `sudo` is for a user who installed Rust with rustup.
fn path_without_cargo(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in [
        "bash", "dirname", "getent", "cut", "find", "sed", "head", "id", "mktemp", "mkdir", "cp",
        "objcopy", "readelf", "install", "ln", "rm", "chmod",
    ] {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {tool}"))
            .output()
            .unwrap();
        let at = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        assert!(out.status.success() && !at.is_empty(), "{tool} not found");
        std::os::unix::fs::symlink(at, bin.join(tool)).unwrap();
    }
    bin
}

/// `install.sh PREFIX` (no built-library argument) run in `cwd` with `env`, without `CARGO`,
/// `CARGO_TARGET_DIR` or `SUDO_USER` from this test's environment unless `env` sets them.
fn install_from_target(cwd: &Path, prefix: &Path, env: &[(&str, &str)]) -> std::process::Output {
    let mut c = Command::new("bash");
    c.arg(root().join("install.sh"))
        .arg(prefix)
        .current_dir(cwd)
        .env_remove("CARGO")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("SUDO_USER");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// Sets a file's modification time to 2000-01-01 (older than every source).
fn age(file: &Path) {
    let st = Command::new("touch")
        .args(["-d", "2000-01-01"])
        .arg(file)
        .status()
        .unwrap();
    assert!(st.success());
}

/// With CARGO_TARGET_DIR set (relative, as cargo reads it: from the current
/// directory) and no cargo anywhere (not on the PATH, no ~/.cargo/bin, no $CARGO: root under
/// sudo), the library built there is installed as it is; one older than its sources is
/// refused with what to run, and nothing is installed.
#[test]
fn install_takes_cargo_target_dir_without_cargo() {
    let dir = scratch("install-no-cargo");
    fake_target(&dir.join("elsewhere"));
    let bin = path_without_cargo(&dir);
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let prefix = dir.join("prefix");
    let env = [
        ("PATH", bin.to_str().unwrap()),
        ("HOME", home.to_str().unwrap()),
        ("CARGO_TARGET_DIR", "elsewhere"),
    ];
    let out = install_from_target(&dir, &prefix, &env);
    assert!(
        out.status.success(),
        "install.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let so = prefix.join(format!("lib/libshmfifo.so.{}", env!("CARGO_PKG_VERSION")));
    assert!(readelf(&so, "-d").contains("Library soname: [libshmfifo.so.0]"));
    assert!(prefix.join("lib/libshmfifo.a").is_file());
    assert!(prefix.join("include/shmfifo.h").is_file());

    // Older than its sources: not installed, and the message says what to run.
    age(&dir.join("elsewhere/release/libshmfifo.so"));
    let prefix2 = dir.join("prefix2");
    let out = install_from_target(&dir, &prefix2, &env);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("is newer than")
            && err.contains("cargo is not found")
            && err.contains("cargo build --release -p shmfifo-ffi"),
        "{err}"
    );
    assert!(!prefix2.exists(), "nothing installed");
}

/// Without CARGO_TARGET_DIR the script asks cargo (`$CARGO`, here a stand-in that
/// logs its calls) where its target directory is, installs a fresh library from there without
/// building, and builds (with that target directory) only a stale one.
#[test]
fn install_asks_cargo_for_its_target_directory() {
    let dir = scratch("install-metadata");
    let target = dir.join("cargo-target");
    fake_target(&target);
    let log = dir.join("cargo.log");
    let fake = dir.join("fake-cargo");
    // `metadata`: cargo's answer (one JSON line); `build`: a fresh library, as a build leaves.
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\necho \"$* CARGO_TARGET_DIR=$CARGO_TARGET_DIR\" >> {log}\n\
             case \"$1\" in\n\
             metadata) echo '{{\"packages\":[],\"target_directory\":\"{t}\",\"version\":1}}' ;;\n\
             build) touch {t}/release/libshmfifo.so ;;\n\
             *) exit 3 ;;\n\
             esac\n",
            log = log.display(),
            t = target.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let env = [("CARGO", fake.to_str().unwrap())];
    let prefix = dir.join("prefix");
    let out = install_from_target(&dir, &prefix, &env);
    assert!(
        out.status.success(),
        "install.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(prefix.join("lib/libshmfifo.a").is_file());
    let calls = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        calls
            .lines()
            .map(|l| l.split(' ').next().unwrap())
            .collect::<Vec<_>>(),
        ["metadata"],
        "a fresh library is not rebuilt: {calls}"
    );

    age(&target.join("release/libshmfifo.so"));
    let out = install_from_target(&dir, &dir.join("prefix2"), &env);
    assert!(
        out.status.success(),
        "install.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    let last = calls.lines().last().unwrap();
    assert_eq!(
        last,
        format!(
            "build --release -p shmfifo-ffi CARGO_TARGET_DIR={}",
            target.display()
        ),
        "{calls}"
    );
}

/// Linking straight against the build tree, as ffi/README.md says: without the
/// SONAME link the program does not start (`libshmfifo.so.0: cannot open shared object
/// file`); with it, and the rpath, it runs. The static library needs neither.
#[test]
fn build_tree_links_as_the_readme_says() {
    let dir = scratch("build-tree");
    let built = dir.join("release");
    fake_target(&dir);
    let include = root().join("include");
    let cc = |args: &[&str], out: &Path| {
        let st = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "cc -std=c11 -D_DEFAULT_SOURCE -Wall -Werror $0 -I {} {} -o {}",
                include.display(),
                args.join(" "),
                out.display()
            ))
            .arg(root().join("examples/producer.c"))
            .status()
            .unwrap();
        assert!(st.success(), "cc {args:?}");
    };
    let d = built.display().to_string();
    let dynamic = dir.join("producer_dyn");
    cc(
        &["-L", &d, &format!("-Wl,-rpath,{d}"), "-lshmfifo"],
        &dynamic,
    );
    let (name, q) = queue("tree");
    // Producer `id` sends 5 messages to its own group.
    let run = |exe: &Path, id: &str| {
        Command::new(exe)
            .args([&name.0, id, "1", "5"])
            .env_remove("LD_LIBRARY_PATH")
            .output()
            .unwrap()
    };
    let out = run(&dynamic, "0");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("libshmfifo.so.0: cannot open shared object file"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::os::unix::fs::symlink("libshmfifo.so", built.join("libshmfifo.so.0")).unwrap();
    let out = run(&dynamic, "0");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stat = dir.join("producer_static");
    cc(
        &[
            &built.join("libshmfifo.a").display().to_string(),
            "-lpthread -ldl -lm",
        ],
        &stat,
    );
    assert!(!readelf(&stat, "-d").contains("libshmfifo"), "linked in");
    assert!(run(&stat, "1").status.success());
    assert_eq!(consume_in_rust(&q, 10).len(), 2, "both programs sent");
}
