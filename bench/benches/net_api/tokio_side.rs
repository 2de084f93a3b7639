use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

struct Conn {
    stream: TcpStream,
    rbuf: Vec<u8>,
}

struct Owners(Vec<mpsc::UnboundedSender<u32>>);

impl Dispatch for Owners {
    fn dispatch(&mut self, owner: usize, keys: &[u32]) -> bool {
        for &key in keys {
            self.0[owner].send(key).expect("owner task alive");
        }
        true
    }
}

async fn echo_server(mut stream: TcpStream) {
    let mut buf = vec![0u8; ECHO_BUF];
    loop {
        let n = match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if stream.write_all(&buf[..n]).await.is_err() {
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
    while !echo.done() {
        if let Some(out) = echo.next_send() {
            conn.stream.write_all(out).await.expect("tokio send");
        }
        let want = echo.want();
        let n = conn
            .stream
            .read(&mut conn.rbuf[..want])
            .await
            .expect("tokio recv");
        for frame in echo.received(&conn.rbuf[..n]) {
            sum = sum.wrapping_add(stage.frame(job.stream, frame).await);
        }
    }
    sum
}

async fn owner(mut rx: mpsc::UnboundedReceiver<u32>, expected: u64) -> u64 {
    let mut sum = 0u64;
    for _ in 0..expected {
        let key = rx.recv().await.expect("dispatchers alive");
        sum = sum.wrapping_add(1).wrapping_add(u64::from(key));
    }
    sum
}

/// One iteration, on a worker: per step, one task per stream.
async fn drive(plan: Arc<Plan>, mut conns: Vec<Option<Conn>>) -> (u64, Vec<Option<Conn>>) {
    let mut sum = 0u64;
    let mut owners = Vec::new();
    let mut senders = Vec::new();
    if plan.stage == StageKind::Keyed {
        for expected in plan.owner_counts() {
            let (tx, rx) = mpsc::unbounded_channel();
            senders.push(tx);
            owners.push(tokio::spawn(owner(rx, expected)));
        }
    }
    for step in 0..plan.steps() {
        let tasks: Vec<_> = plan
            .jobs(step)
            .map(|job| {
                let mut conn = conns[job.stream].take().expect("connection home");
                let plan = plan.clone();
                let senders = senders.clone();
                let task = tokio::spawn(async move {
                    let sum = if plan.stage == StageKind::Keyed {
                        let mut stage = Stage {
                            kind: plan.stage,
                            dispatch: Owners(senders),
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
        for (stream, task) in tasks {
            let (conn, part) = task.await.expect("stream task");
            conns[stream] = Some(conn);
            sum = sum.wrapping_add(part);
        }
    }
    drop(senders);
    for owner in owners {
        sum = sum.wrapping_add(owner.await.expect("owner task"));
    }
    (sum, conns)
}

/// A multi-thread runtime with 2 workers, its echo servers and the
/// client ends of its connections.
pub(super) struct Side {
    conns: Option<Vec<Option<Conn>>>,
    rt: tokio::runtime::Runtime,
}

impl Side {
    pub(super) fn new(streams: usize) -> Side {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .enable_all()
            .build()
            .expect("tokio multi-thread runtime");
        let setup = rt.spawn(async move {
            let listener = TcpListener::bind(loopback()).await?;
            let addr = listener.local_addr()?;
            let mut conns = Vec::with_capacity(streams);
            for _ in 0..streams {
                let stream = TcpStream::connect(addr).await?;
                let (server, _) = listener.accept().await?;
                stream.set_nodelay(true)?;
                server.set_nodelay(true)?;
                tokio::spawn(echo_server(server));
                conns.push(Some(Conn {
                    stream,
                    rbuf: vec![0u8; MAX_CHUNK],
                }));
            }
            std::io::Result::Ok(conns)
        });
        let conns = rt
            .block_on(setup)
            .expect("setup task")
            .expect("tokio connections");
        Side {
            conns: Some(conns),
            rt,
        }
    }

    pub(super) fn run(&mut self, plan: &Arc<Plan>) -> u64 {
        let conns = self.conns.take().expect("connections home");
        let task = self.rt.spawn(drive(plan.clone(), conns));
        let (sum, conns) = self.rt.block_on(task).expect("driver task");
        self.conns = Some(conns);
        sum
    }
}
