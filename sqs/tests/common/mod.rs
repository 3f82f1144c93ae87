//! Backends for the shared tests: a local queue, SQS's API on `shmfifo serve` (in this
//! process), and SQS's API on moto's server (`moto_server` from the virtual environment
//! `ci/python.sh` makes in cargo's target directory, or `$MOTO_SERVER`).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Once};
use std::time::Duration;

use shmfifo::{FifoQueue, Queue, QueueConfig};
use shmfifo_sqs::SqsQueue;

static ENV: Once = Once::new();
static N: AtomicU32 = AtomicU32::new(0);

/// Credentials and region for the SDK (local servers accept any).
pub fn aws_env() {
    ENV.call_once(|| {
        std::env::set_var("AWS_ACCESS_KEY_ID", "test");
        std::env::set_var("AWS_SECRET_ACCESS_KEY", "test");
        std::env::set_var("AWS_REGION", "us-east-1");
        std::env::remove_var("AWS_ENDPOINT_URL");
        std::env::remove_var("AWS_PROFILE");
    });
}

pub fn unique(tag: &str) -> String {
    format!(
        "{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A directory on tmpfs, removed on drop.
pub struct Dir(pub PathBuf);

impl Dir {
    pub fn new(tag: &str) -> Dir {
        let d = PathBuf::from("/dev/shm").join(unique(&format!("shmfifo-sqs-{tag}")));
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `shmfifo serve` on a free port, on its own runtime thread; stopped on drop.
pub struct Serve {
    pub endpoint: String,
    pub dir: Dir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Serve {
    pub fn start() -> Serve {
        let dir = Dir::new("serve");
        let cfg = shmfifo_serve::Config {
            addr: "127.0.0.1:0".parse().unwrap(),
            dir: dir.0.clone(),
            ..Default::default()
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(shmfifo_serve::serve(
                cfg,
                move |addr| tx.send(addr).unwrap(),
                async {
                    let _ = stopped.await;
                },
            ))
            .unwrap();
        });
        let addr = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        Serve {
            endpoint: format!("http://{addr}"),
            dir,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// moto's server on a free port; killed on drop.
pub struct Moto {
    pub endpoint: String,
    child: Child,
}

impl Moto {
    pub fn start() -> Moto {
        // Else the virtual environment in cargo's target directory (the parent of this
        // test's temporary directory, wherever CARGO_TARGET_DIR put it).
        let exe = std::env::var("MOTO_SERVER").unwrap_or_else(|_| {
            std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
                .parent()
                .expect("CARGO_TARGET_TMPDIR is inside the target directory")
                .join("pyvenv/bin/moto_server")
                .display()
                .to_string()
        });
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let child = Command::new(&exe)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("moto_server ({exe}): {e}; run `bash ci/python.sh` first, which installs it")
            });
        for _ in 0..300 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Moto {
            endpoint: format!("http://127.0.0.1:{port}"),
            child,
        }
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Creates a FIFO queue through SQS's API at `endpoint`; returns its URL.
pub fn create_remote(endpoint: &str, name: &str, attrs: &[(&str, &str)]) -> String {
    aws_env();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = shmfifo_sqs::AsyncSqsQueue::client(Some(endpoint)).await;
        let mut req = client
            .create_queue()
            .queue_name(name)
            .attributes(aws_sdk_sqs_attr("FifoQueue"), "true");
        for (k, v) in attrs {
            req = req.attributes(aws_sdk_sqs_attr(k), *v);
        }
        req.send().await.unwrap().queue_url().unwrap().to_owned()
    })
}

fn aws_sdk_sqs_attr(name: &str) -> aws_sdk_sqs::types::QueueAttributeName {
    aws_sdk_sqs::types::QueueAttributeName::from(name)
}

/// A backend of the shared suite.
pub enum Backend {
    Local(Dir),
    Serve(Serve),
    Moto(Moto),
}

impl Backend {
    pub fn all() -> Vec<Arc<Backend>> {
        aws_env();
        vec![
            Arc::new(Backend::Local(Dir::new("local"))),
            Arc::new(Backend::Serve(Serve::start())),
            Arc::new(Backend::Moto(Moto::start())),
        ]
    }

    pub fn name(&self) -> &'static str {
        match self {
            Backend::Local(_) => "shared memory",
            Backend::Serve(_) => "shmfifo serve (SQS API)",
            Backend::Moto(_) => "moto_server (SQS API)",
        }
    }

    pub fn is_moto(&self) -> bool {
        matches!(self, Backend::Moto(_))
    }

    /// A new FIFO queue with SQS attributes `attrs`.
    pub fn queue(&self, attrs: &[(&str, &str)]) -> Box<dyn FifoQueue> {
        let name = format!("{}.fifo", unique("q"));
        match self {
            Backend::Local(d) => {
                let cfg = QueueConfig::new()
                    .max_messages(1024)
                    .max_groups(256)
                    .dedup_entries(1024)
                    .from_sqs_attributes(attrs.iter().copied())
                    .unwrap();
                Box::new(Queue::create_at(d.0.join(&name), &cfg).unwrap())
            }
            Backend::Serve(s) => {
                let url = create_remote(&s.endpoint, &name, attrs);
                Box::new(SqsQueue::open_url(&url, Some(&s.endpoint)).unwrap())
            }
            Backend::Moto(m) => {
                let url = create_remote(&m.endpoint, &name, attrs);
                Box::new(SqsQueue::open_url(&url, Some(&m.endpoint)).unwrap())
            }
        }
    }
}
