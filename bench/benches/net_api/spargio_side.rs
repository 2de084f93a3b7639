use super::*;
use spargio::buf::IoBuf;
use spargio::net::{StreamSessionPolicy, TcpListener, TcpStream};
use spargio::{SendError, ShardCtx};

struct Conn {
    stream: TcpStream,
    rbuf: Vec<u8>,
    /// The client end's multishot receive, when enabled.
    segs: Option<spargio::net::RecvSegments>,
}

/// `SPARGIO_BENCH_NET_RECV=single`: single-shot receives instead of
/// multishot receive into provided buffers.
fn multishot() -> bool {
    std::env::var("SPARGIO_BENCH_NET_RECV").map_or(true, |v| v != "single")
}

/// Provided buffers as large as the echo server's single-shot reads.
fn pool() -> spargio::net::RecvPoolConfig {
    spargio::net::RecvPoolConfig::default()
        .buffers(4)
        .buffer_len(ECHO_BUF as u32)
}

/// Keyed dispatch as cross-shard messages: owner `o` is the task pinned
/// on shard `o`.
struct Owners(ShardCtx);

impl Dispatch for Owners {
    fn dispatch(&mut self, owner: usize, keys: &[u32]) -> bool {
        let mut msgs = [(KEY_TAG, 0u32); KEYS_PER_FRAME];
        for (msg, &key) in msgs.iter_mut().zip(keys) {
            msg.1 = key;
        }
        match self.0.send_many_raw_nowait(owner, &msgs[..keys.len()]) {
            Ok(()) => true,
            Err(SendError::Backpressure) => false,
            Err(err) => panic!("keyed dispatch to shard {owner} failed: {err}"),
        }
    }
}

async fn echo_server(stream: TcpStream) {
    if multishot() {
        // Each received segment is sent back from the pool buffer it
        // arrived in (no copy), then returns to the pool.
        let mut segs = stream
            .recv_multishot_segments_with(pool())
            .await
            .expect("pool");
        while let Some(Ok(seg)) = segs.next_segment().await {
            if stream.write_all_owned(seg).await.is_err() {
                return;
            }
        }
        return;
    }
    let mut buf = Vec::with_capacity(ECHO_BUF);
    loop {
        buf.clear();
        let (res, back) = stream.recv_buf(buf).await;
        buf = back;
        match res {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let (res, back) = stream.write_all_buf(buf).await;
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
    while !echo.done() {
        if let Some(out) = echo.next_send() {
            conn.stream
                .write_all_owned(out)
                .await
                .expect("spargio send");
        }
        if let Some(segs) = conn.segs.as_mut() {
            let seg = segs.next_segment().await.expect("open").expect("recv");
            for frame in echo.received(&seg) {
                sum = sum.wrapping_add(stage.frame(job.stream, frame).await);
            }
            continue;
        }
        let want = echo.want();
        rbuf.clear();
        let (res, slice) = conn.stream.recv_buf(rbuf.slice(..want)).await;
        rbuf = slice.into_inner();
        let n = res.expect("spargio recv");
        for frame in echo.received(&rbuf[..n]) {
            sum = sum.wrapping_add(stage.frame(job.stream, frame).await);
        }
    }
    conn.rbuf = rbuf;
    sum
}

/// Owner task pinned on its shard: takes `expected` keys from the
/// shard's event stream.
async fn owner(expected: u64) -> u64 {
    let ctx = ShardCtx::current().expect("owner runs on a shard");
    let mut sum = 0u64;
    for _ in 0..expected {
        let (tag, key) = ctx.next_event().await.payload();
        assert_eq!(tag, KEY_TAG, "unexpected message");
        sum = sum.wrapping_add(1).wrapping_add(u64::from(key));
    }
    sum
}

/// One iteration, in a stealable task: per step, one task per stream,
/// pinned to the stream's session shard.
async fn drive(
    handle: spargio::RuntimeHandle,
    plan: Arc<Plan>,
    mut conns: Vec<Option<Conn>>,
) -> (u64, Vec<Option<Conn>>) {
    let mut sum = 0u64;
    let owners: Vec<_> = if plan.stage == StageKind::Keyed {
        plan.owner_counts()
            .into_iter()
            .enumerate()
            .map(|(shard, expected)| {
                handle
                    .spawn_pinned(shard, owner(expected))
                    .expect("spawn owner")
            })
            .collect()
    } else {
        Vec::new()
    };
    for step in 0..plan.steps() {
        let tasks: Vec<_> = plan
            .jobs(step)
            .map(|job| {
                let mut conn = conns[job.stream].take().expect("connection home");
                let plan = plan.clone();
                let stream = conn.stream.clone();
                let task = stream
                    .spawn_on_session(&handle, async move {
                        let sum = if plan.stage == StageKind::Keyed {
                            let ctx = ShardCtx::current().expect("on a shard");
                            let mut stage = Stage {
                                kind: plan.stage,
                                dispatch: Owners(ctx),
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
                    })
                    .expect("spawn stream task");
                (job.stream, task)
            })
            .collect();
        for (stream, task) in tasks {
            let (conn, part) = task.await.expect("stream task");
            conns[stream] = Some(conn);
            sum = sum.wrapping_add(part);
        }
    }
    for owner in owners {
        sum = sum.wrapping_add(owner.await.expect("owner task"));
    }
    (sum, conns)
}

/// A 2-shard runtime, its echo servers and the client ends of its
/// connections.
pub(super) struct Side {
    conns: Option<Vec<Option<Conn>>>,
    handle: spargio::RuntimeHandle,
    iterations: u64,
    /// Kept for its `Drop` (shuts down and joins the shards); last, so
    /// the connections close first.
    _rt: spargio::Runtime,
}

impl Side {
    pub(super) fn new(streams: usize, placement: Placement) -> Side {
        let mut builder = spargio::Runtime::builder().shards(WORKERS);
        if let Some(us) = env_u64("SPARGIO_BENCH_SPIN_BEFORE_PARK_US") {
            builder = builder.spin_before_park(std::time::Duration::from_micros(us));
        }
        if std::env::var_os("SPARGIO_BENCH_BUSY_POLL").is_some_and(|v| v == "1") {
            builder = builder.busy_poll(true);
        }
        let rt = builder.build().expect("spargio runtime");
        let handle = rt.handle();
        let h = handle.clone();
        let setup = handle
            .spawn_stealable(async move {
                let listener = TcpListener::bind_socket_addr(&h, loopback())?;
                let addr = listener.local_addr()?;
                let mut conns = Vec::with_capacity(streams);
                for i in 0..streams {
                    let stream = TcpStream::connect_socket_addr_with_session_policy(
                        &h,
                        addr,
                        StreamSessionPolicy::Fixed(placement.client(i)),
                    )
                    .await?;
                    let (server, _) = listener
                        .accept_with_session_policy(StreamSessionPolicy::Fixed(placement.server(i)))
                        .await?;
                    stream.set_nodelay(true)?;
                    server.set_nodelay(true)?;
                    server
                        .spawn_on_session(&h, echo_server(server.clone()))
                        .expect("spawn echo server");
                    let segs = if multishot() {
                        Some(stream.recv_multishot_segments_with(pool()).await?)
                    } else {
                        None
                    };
                    conns.push(Some(Conn {
                        stream,
                        rbuf: Vec::with_capacity(MAX_CHUNK),
                        segs,
                    }));
                }
                std::io::Result::Ok(conns)
            })
            .expect("spawn setup");
        let conns = spargio::block_on(setup)
            .expect("setup task")
            .expect("spargio connections");
        Side {
            conns: Some(conns),
            handle,
            iterations: 0,
            _rt: rt,
        }
    }

    pub(super) fn run(&mut self, plan: &Arc<Plan>) -> u64 {
        let conns = self.conns.take().expect("connections home");
        let task = self
            .handle
            .spawn_stealable(drive(self.handle.clone(), plan.clone(), conns))
            .expect("spawn driver");
        let (sum, conns) = spargio::block_on(task).expect("driver task");
        self.conns = Some(conns);
        self.iterations += 1;
        sum
    }

    pub(super) fn stats(&self) -> spargio::RuntimeStats {
        self.handle.stats_snapshot()
    }

    /// Iterations run so far.
    pub(super) fn iterations(&self) -> u64 {
        self.iterations
    }
}
