use std::cell::RefCell;
use std::rc::Rc;
use std::sync::mpsc;
use std::thread;

use super::*;
use compio::buf::{BufResult, IntoInner, IoBuf};
use compio::io::{AsyncRead, AsyncWriteExt};
use compio::net::{TcpListener, TcpStream};

struct Conn {
    stream: TcpStream,
    rbuf: Vec<u8>,
}

struct Owners(Vec<flume::Sender<u32>>);

impl Dispatch for Owners {
    fn dispatch(&mut self, owner: usize, keys: &[u32]) -> bool {
        for &key in keys {
            self.0[owner].send(key).expect("owner task alive");
        }
        true
    }
}

/// Work for one runtime thread.
enum Cmd {
    /// Connect the client end of stream `stream` to `addr`.
    Connect {
        stream: usize,
        addr: SocketAddr,
        done: mpsc::Sender<()>,
    },
    /// Accept one connection and serve it (echo).
    Accept {
        done: mpsc::Sender<()>,
    },
    /// Run a whole iteration (thread 0 only) and send the checksum.
    Iterate {
        plan: Arc<Plan>,
        done: mpsc::Sender<u64>,
    },
    /// Run this thread's streams of `step` and send their checksum.
    Step {
        plan: Arc<Plan>,
        step: usize,
        owners: Vec<flume::Sender<u32>>,
        done: flume::Sender<u64>,
    },
    /// Be the keyed owner of this thread for one iteration.
    Owner {
        keys: flume::Receiver<u32>,
        expected: u64,
        done: flume::Sender<u64>,
    },
    Stop,
}

/// One runtime thread's state.
struct Worker {
    id: usize,
    listener: TcpListener,
    /// Client ends living on this thread, by stream index.
    conns: RefCell<Vec<Option<Conn>>>,
    /// Every thread's command channel (this one's too).
    peers: Vec<flume::Sender<Cmd>>,
    placement: Placement,
}

/// `COMPIO_BENCH_NET_RECV=single`: plain reads instead of multishot
/// receive into the runtime's provided-buffer pool.
fn multishot() -> bool {
    std::env::var("COMPIO_BENCH_NET_RECV").map_or(true, |v| v != "single")
}

async fn echo_server(stream: TcpStream) {
    if multishot() {
        use compio::io::AsyncReadMulti;
        use futures_util::StreamExt;
        let mut reader = &stream;
        let mut writer = &stream;
        let segs = reader.read_multi(0);
        let mut segs = std::pin::pin!(segs);
        while let Some(Ok(buf)) = segs.next().await {
            if writer.write_all(buf).await.0.is_err() {
                return;
            }
        }
        return;
    }
    let mut stream = stream;
    let mut buf = Vec::with_capacity(ECHO_BUF);
    loop {
        // A read only ever raises a Vec's length: start from empty.
        buf.clear();
        let BufResult(res, back) = stream.read(buf).await;
        buf = back;
        match res {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let BufResult(res, back) = stream.write_all(buf).await;
        buf = back;
        if res.is_err() {
            return;
        }
    }
}

async fn client<D: Dispatch>(
    conn: &mut Conn,
    plan: &Plan,
    job: StreamJob,
    stage: &mut Stage<D>,
) -> u64 {
    let mut echo = Echo::new(plan, job);
    let mut sum = 0u64;
    let mut rbuf = std::mem::take(&mut conn.rbuf);
    let mut stream = &conn.stream;
    if multishot() {
        use compio::io::AsyncReadMulti;
        use futures_util::StreamExt;
        let mut reader = &conn.stream;
        let segs = reader.read_multi(0);
        let mut segs = std::pin::pin!(segs);
        while !echo.done() {
            if let Some(out) = echo.next_send() {
                let BufResult(res, _) = stream.write_all(out).await;
                res.expect("compio send");
            }
            let seg = segs.next().await.expect("open").expect("compio recv");
            for frame in echo.received(&seg) {
                sum = sum.wrapping_add(stage.frame(job.stream, frame).await);
            }
        }
        return sum;
    }
    while !echo.done() {
        if let Some(out) = echo.next_send() {
            let BufResult(res, _) = stream.write_all(out).await;
            res.expect("compio send");
        }
        let want = echo.want();
        rbuf.clear();
        let BufResult(res, slice) = stream.read(rbuf.slice(..want)).await;
        rbuf = slice.into_inner();
        let n = res.expect("compio recv");
        for frame in echo.received(&rbuf[..n]) {
            sum = sum.wrapping_add(stage.frame(job.stream, frame).await);
        }
    }
    conn.rbuf = rbuf;
    sum
}

async fn owner(keys: flume::Receiver<u32>, expected: u64) -> u64 {
    let mut sum = 0u64;
    for _ in 0..expected {
        let key = keys.recv_async().await.expect("dispatchers alive");
        sum = sum.wrapping_add(1).wrapping_add(u64::from(key));
    }
    sum
}

impl Worker {
    async fn handle(self: Rc<Worker>, cmd: Cmd) {
        match cmd {
            Cmd::Connect { stream, addr, done } => {
                let conn = TcpStream::connect(addr).await.expect("compio connect");
                conn.set_nodelay(true).expect("nodelay");
                self.conns.borrow_mut()[stream] = Some(Conn {
                    stream: conn,
                    rbuf: Vec::with_capacity(MAX_CHUNK),
                });
                let _ = done.send(());
            }
            Cmd::Accept { done } => {
                let (server, _) = self.listener.accept().await.expect("compio accept");
                server.set_nodelay(true).expect("nodelay");
                compio::runtime::spawn(echo_server(server)).detach();
                let _ = done.send(());
            }
            Cmd::Iterate { plan, done } => {
                let sum = self.iterate(plan).await;
                let _ = done.send(sum);
            }
            Cmd::Step {
                plan,
                step,
                owners,
                done,
            } => {
                let sum = self.run_step(&plan, step, &owners).await;
                let _ = done.send(sum);
            }
            Cmd::Owner {
                keys,
                expected,
                done,
            } => {
                let _ = done.send(owner(keys, expected).await);
            }
            Cmd::Stop => unreachable!("handled by the command loop"),
        }
    }

    /// Runs this thread's streams of `step`, one task each, and joins
    /// them.
    async fn run_step(&self, plan: &Arc<Plan>, step: usize, owners: &[flume::Sender<u32>]) -> u64 {
        let tasks: Vec<_> = plan
            .jobs(step)
            .filter(|job| self.placement.client(job.stream) == self.id)
            .map(|job| {
                let mut conn = self.conns.borrow_mut()[job.stream]
                    .take()
                    .expect("connection home");
                let plan = plan.clone();
                let owners = owners.to_vec();
                let task = compio::runtime::spawn(async move {
                    let sum = if plan.stage == StageKind::Keyed {
                        let mut stage = Stage {
                            kind: plan.stage,
                            dispatch: Owners(owners),
                        };
                        client(&mut conn, &plan, job, &mut stage).await
                    } else {
                        let mut stage = Stage {
                            kind: plan.stage,
                            dispatch: NoDispatch,
                        };
                        client(&mut conn, &plan, job, &mut stage).await
                    };
                    (conn, sum)
                });
                (job.stream, task)
            })
            .collect();
        let mut sum = 0u64;
        for (stream, task) in tasks {
            let (conn, part) = task.await.expect("stream task");
            self.conns.borrow_mut()[stream] = Some(conn);
            sum = sum.wrapping_add(part);
        }
        sum
    }

    /// One iteration, driven from thread 0: each step runs here and,
    /// over its command channel, on every other thread that has
    /// streams in it.
    async fn iterate(&self, plan: Arc<Plan>) -> u64 {
        let mut sum = 0u64;
        let mut owners = Vec::new();
        let mut owner_done = Vec::new();
        let mut local_owner = None;
        if plan.stage == StageKind::Keyed {
            for (thread, expected) in plan.owner_counts().into_iter().enumerate() {
                let (tx, rx) = flume::unbounded();
                owners.push(tx);
                if thread == self.id {
                    local_owner = Some(compio::runtime::spawn(owner(rx, expected)));
                } else {
                    let (done, wait) = flume::bounded(1);
                    self.peers[thread]
                        .send(Cmd::Owner {
                            keys: rx,
                            expected,
                            done,
                        })
                        .expect("compio worker alive");
                    owner_done.push(wait);
                }
            }
        }
        for step in 0..plan.steps() {
            let mut remote = Vec::new();
            for thread in (0..WORKERS).filter(|&t| t != self.id) {
                let busy = plan
                    .jobs(step)
                    .any(|job| self.placement.client(job.stream) == thread);
                if busy {
                    let (done, wait) = flume::bounded(1);
                    self.peers[thread]
                        .send(Cmd::Step {
                            plan: plan.clone(),
                            step,
                            owners: owners.clone(),
                            done,
                        })
                        .expect("compio worker alive");
                    remote.push(wait);
                }
            }
            sum = sum.wrapping_add(self.run_step(&plan, step, &owners).await);
            for wait in remote {
                sum = sum.wrapping_add(wait.recv_async().await.expect("compio step"));
            }
        }
        drop(owners);
        if let Some(task) = local_owner {
            sum = sum.wrapping_add(task.await.expect("owner task"));
        }
        for wait in owner_done {
            sum = sum.wrapping_add(wait.recv_async().await.expect("compio owner"));
        }
        sum
    }
}

/// Two compio runtimes, one per thread, each with a listener, echo
/// servers and client ends.
pub(super) struct Side {
    cmds: Vec<flume::Sender<Cmd>>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Side {
    pub(super) fn new(streams: usize, placement: Placement) -> Side {
        let (cmds, inboxes): (Vec<_>, Vec<_>) = (0..WORKERS).map(|_| flume::unbounded()).unzip();
        let (addr_tx, addr_rx) = mpsc::channel();
        let threads = inboxes
            .into_iter()
            .enumerate()
            .map(|(id, inbox)| {
                let peers = cmds.clone();
                let addr_tx = addr_tx.clone();
                thread::spawn(move || worker_main(id, inbox, peers, placement, streams, addr_tx))
            })
            .collect();
        let mut addrs = [loopback(); WORKERS];
        for _ in 0..WORKERS {
            let (id, addr) = addr_rx.recv().expect("compio worker started");
            addrs[id] = addr;
        }
        let side = Side { cmds, threads };
        let (done, wait) = mpsc::channel();
        for i in 0..streams {
            side.send(
                placement.client(i),
                Cmd::Connect {
                    stream: i,
                    addr: addrs[placement.server(i)],
                    done: done.clone(),
                },
            );
            wait.recv().expect("compio connect");
            side.send(placement.server(i), Cmd::Accept { done: done.clone() });
            wait.recv().expect("compio accept");
        }
        side
    }

    fn send(&self, thread: usize, cmd: Cmd) {
        self.cmds[thread].send(cmd).expect("compio worker alive");
    }

    pub(super) fn run(&self, plan: &Arc<Plan>) -> u64 {
        let (done, wait) = mpsc::channel();
        self.send(
            0,
            Cmd::Iterate {
                plan: plan.clone(),
                done,
            },
        );
        wait.recv().expect("compio iteration")
    }
}

impl Drop for Side {
    fn drop(&mut self) {
        for cmds in &self.cmds {
            let _ = cmds.send(Cmd::Stop);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn worker_main(
    id: usize,
    inbox: flume::Receiver<Cmd>,
    peers: Vec<flume::Sender<Cmd>>,
    placement: Placement,
    streams: usize,
    addr_tx: mpsc::Sender<(usize, SocketAddr)>,
) {
    // The provided-buffer pool multishot reads share on this thread:
    // 4 buffers of 64 KiB per socket, as on the spargio side.
    let mut proactor = compio::driver::ProactorBuilder::new();
    proactor
        .buffer_pool_size(std::num::NonZero::new((4 * 2 * streams) as u16).expect("streams"))
        .buffer_pool_buffer_len(ECHO_BUF);
    let rt = compio::runtime::RuntimeBuilder::new()
        .with_proactor(proactor)
        .build()
        .expect("compio runtime");
    rt.block_on(async move {
        let listener = TcpListener::bind(loopback()).await.expect("compio bind");
        let addr = listener.local_addr().expect("local addr");
        addr_tx.send((id, addr)).expect("benchmark thread alive");
        let worker = Rc::new(Worker {
            id,
            listener,
            conns: RefCell::new((0..streams).map(|_| None).collect()),
            peers,
            placement,
        });
        while let Ok(cmd) = inbox.recv_async().await {
            if let Cmd::Stop = cmd {
                break;
            }
            compio::runtime::spawn(worker.clone().handle(cmd)).detach();
        }
    });
}
