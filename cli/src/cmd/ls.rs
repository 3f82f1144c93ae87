//! `shmfifo ls`: the queues in a directory, with their counts.

use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::{json, Value};
use shmfifo::{Error, Queue};

use super::{print_json, Ctx};
use crate::errors::{self, Failure};
use crate::output::{num, out, size, Table};

/// Arguments of `ls`.
#[derive(Args, Debug)]
pub struct LsArgs {
    /// The directory to look in.
    #[arg(long, value_name = "DIR", default_value = "/dev/shm")]
    pub dir: PathBuf,
    /// Also list files that are not shmfifo queues (or cannot be read), saying what they are.
    #[arg(long)]
    pub all: bool,
}

/// What one file turned out to be.
enum Entry {
    /// A queue, opened.
    Queue {
        visible: u64,
        in_flight: u64,
        delayed: u64,
        groups: u64,
        bytes: u64,
    },
    /// A shmfifo queue that could not be opened (another layout version, corrupted, full of
    /// participants...).
    Broken(Error),
    /// Not a queue, or unreadable: listed only with `--all`.
    Other(String),
}

/// Whether `path` is a regular file (not followed) owned by this process's user (the owner
/// of `/proc/self`, which the kernel gives the process's effective uid).
fn owned_by_us(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(me) = std::fs::metadata("/proc/self").map(|m| m.uid()) else {
        return false;
    };
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.uid() == me)
}

fn look(path: &Path) -> Entry {
    match Queue::observe_at(path) {
        Ok(q) => {
            let a = q.attributes();
            Entry::Queue {
                visible: a.approximate_number_of_messages,
                in_flight: a.approximate_number_of_messages_not_visible,
                delayed: a.approximate_number_of_messages_delayed,
                groups: a.active_groups,
                bytes: a.arena_bytes,
            }
        }
        Err(Error::NotAnArena { .. }) => Entry::Other("not a shmfifo queue".into()),
        Err(Error::NotReady) => Entry::Other("unfinished file".into()),
        // Unreadable: no way to tell whether it is a queue.
        Err(Error::Io(e)) => Entry::Other(format!("unreadable: {e}")),
        // Our own file that is not opened (permissions wider than its creator asked, say):
        // a queue of ours that cannot be opened, listed with the reason.
        Err(e @ Error::UntrustedFile { .. }) if owned_by_us(path) => Entry::Broken(e),
        // Another user's file (or a kind of file no queue is): not one of ours to list.
        Err(Error::UntrustedFile { reason, .. }) => Entry::Other(format!("not opened: {reason}")),
        Err(e) => Entry::Broken(e),
    }
}

/// Lists the queues.
pub fn run(a: &LsArgs, ctx: Ctx) -> Result<(), Failure> {
    let dir_shown = a.dir.display().to_string();
    // A directory that is not there is QueueDoesNotExist's "no directory" (10), as for
    // `create`; another failure the system's (35). (Both were exit code 3, for input.)
    let rd = std::fs::read_dir(&a.dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Failure::queue(
            &dir_shown,
            Error::QueueDoesNotExist {
                path: a.dir.join(""),
            },
        ),
        _ => Failure::queue(&dir_shown, Error::Io(e)),
    })?;
    let mut files: Vec<(String, PathBuf)> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    files.sort();
    let in_shm = a.dir == Path::new("/dev/shm");
    let mut rows = Vec::new();
    let mut skipped = 0usize;
    for (name, path) in files {
        let entry = look(&path);
        if matches!(entry, Entry::Other(_)) && !a.all {
            skipped += 1;
            continue;
        }
        // The form other commands take: a bare name under /dev/shm, a path elsewhere; with
        // its control characters escaped (a name in a shared directory is anyone's, and the
        // table goes to a terminal).
        let shown = printable(&if in_shm {
            name
        } else {
            path.display().to_string()
        });
        rows.push((shown, path, entry));
    }
    if ctx.json {
        let v: Vec<Value> = rows
            .iter()
            .map(|(shown, path, e)| {
                let mut o = json!({"queue": shown, "path": path.display().to_string()});
                let m = o.as_object_mut().expect("an object");
                match e {
                    Entry::Queue {
                        visible,
                        in_flight,
                        delayed,
                        groups,
                        bytes,
                    } => {
                        m.insert("status".into(), json!("ok"));
                        m.insert("visible".into(), json!(visible));
                        m.insert("in_flight".into(), json!(in_flight));
                        m.insert("delayed".into(), json!(delayed));
                        m.insert("active_groups".into(), json!(groups));
                        m.insert("arena_bytes".into(), json!(bytes));
                    }
                    Entry::Broken(err) => {
                        m.insert("status".into(), json!("error"));
                        m.insert(
                            "error".into(),
                            json!({"kind": errors::kind(err), "exit_code": errors::code(err), "message": err.to_string()}),
                        );
                    }
                    Entry::Other(what) => {
                        m.insert("status".into(), json!("not_a_queue"));
                        m.insert("what".into(), json!(what));
                    }
                }
                o
            })
            .collect();
        print_json(&Value::Array(v));
        return Ok(());
    }
    // Where none is listed, the files left out are counted: another user's queues among them,
    // which this user cannot open.
    let others = match skipped {
        0 => String::new(),
        1 => " (1 other file: `--all` says what it is)".to_owned(),
        n => format!(" ({n} other files: `--all` says what each is)"),
    };
    if rows.is_empty() {
        eprintln!("no shmfifo queues in {dir_shown}{others}");
        return Ok(());
    }

    let mut t = Table::new(&[
        "QUEUE",
        "VISIBLE",
        "IN-FLIGHT",
        "DELAYED",
        "GROUPS",
        "SIZE",
        "STATUS",
    ]);
    for (shown, _, e) in rows {
        let dash = || "-".to_owned();
        t.row(match e {
            Entry::Queue {
                visible,
                in_flight,
                delayed,
                groups,
                bytes,
            } => vec![
                shown,
                num(visible),
                num(in_flight),
                num(delayed),
                num(groups),
                size(bytes),
                "ok".into(),
            ],
            Entry::Broken(err) => vec![shown, dash(), dash(), dash(), dash(), dash(), broken(&err)],
            Entry::Other(what) => vec![shown, dash(), dash(), dash(), dash(), dash(), what],
        });
    }
    out(&t.render(0));
    Ok(())
}

/// A short status for a queue that could not be opened.
fn broken(e: &Error) -> String {
    match e {
        Error::LayoutVersionMismatch { found, expected } => {
            format!("layout {found} (this shmfifo speaks {expected})")
        }
        Error::ParticipantLimitReached { max_participants } => {
            format!("all {max_participants} participant slots in use")
        }
        e => format!("{}: {e}", errors::kind(e)),
    }
}

/// `s` with its control characters escaped as Rust writes them (`\n`, `\u{1b}`): a file name
/// printed to a terminal cannot move the cursor or fake a row.
pub(crate) fn printable(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    /// Control characters of a planted name are shown escaped, the rest as it is.
    #[test]
    fn names_are_printed_with_their_control_characters_escaped() {
        assert_eq!(
            super::printable("q\u{1b}[2J\nx.fifo"),
            "q\\u{1b}[2J\\nx.fifo"
        );
        assert_eq!(super::printable("héllo.fifo"), "héllo.fifo");
    }
}
