//! redis-rs (tokio flavour) inside spargio tasks, against the test
//! binary's private Redis server, on both backends: GET/SET with text and
//! binary values, pipelines of 100 commands (plain and MULTI/EXEC), one
//! multiplexed connection cloned into tasks on every shard, pub/sub to a
//! stealable task; and a runtime that used it drops without leaving a
//! thread.

mod common;

use std::collections::BTreeSet;

use common::{on_each_backend, on_each_backend_then_no_threads_left, shard, tag};
use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use spargio_test_peers::{redis, require_peer, Peer};

async fn connect(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .expect("the URL parses")
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

#[test]
fn get_and_set_text_and_binary_values() {
    require_peer!(Peer::Redis);
    let url = redis().url();
    on_each_backend(true, move |_, backend| {
        let url = url.clone();
        async move {
            let mut con = connect(&url).await;
            let key = |k: &str| format!("eco:{}:{k}", tag(backend));
            let () = con.set(key("text"), "ベンチ").await.unwrap();
            let got: String = con.get(key("text")).await.unwrap();
            assert_eq!(got, "ベンチ");
            // Every byte value, and a large one (several socket writes).
            let every: Vec<u8> = (0..=255u8).rev().chain(0..=255).collect();
            let big: Vec<u8> = (0..1_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
            for (name, value) in [("every", &every), ("big", &big)] {
                let () = con.set(key(name), value).await.unwrap();
                let got: Vec<u8> = con.get(key(name)).await.unwrap();
                assert!(got == *value, "{name}: the bytes came back changed");
            }
            let missing: Option<Vec<u8>> = con.get(key("missing")).await.unwrap();
            assert_eq!(missing, None);
        }
    });
}

#[test]
fn pipelines_of_100_commands_plain_and_atomic() {
    require_peer!(Peer::Redis);
    let url = redis().url();
    on_each_backend(true, move |_, backend| {
        let url = url.clone();
        async move {
            let mut con = connect(&url).await;
            let list = format!("eco:{}:list", tag(backend));
            let counter = format!("eco:{}:pipe-counter", tag(backend));
            let _: () = con.del(&[&list, &counter]).await.unwrap();

            // Plain: 100 INCRBYs, every reply in order.
            let mut pipe = redis::pipe();
            for i in 1..=100i64 {
                pipe.incr(&counter, i);
            }
            let sums: Vec<i64> = pipe.query_async(&mut con).await.unwrap();
            let want: Vec<i64> = (1..=100).map(|i| i * (i + 1) / 2).collect();
            assert_eq!(sums, want);

            // Atomic (MULTI/EXEC): 100 RPUSHes, the list's length after each.
            let mut pipe = redis::pipe();
            pipe.atomic();
            for i in 0..100 {
                pipe.rpush(&list, format!("item {i}"));
            }
            let lengths: Vec<i64> = pipe.query_async(&mut con).await.unwrap();
            assert_eq!(lengths, (1..=100).collect::<Vec<i64>>());
            let items: Vec<String> = con.lrange(&list, 0, -1).await.unwrap();
            let want: Vec<String> = (0..100).map(|i| format!("item {i}")).collect();
            assert_eq!(items, want);

            // An atomic pipeline with a failing command: EXEC still runs
            // the others, and the failure reaches the caller.
            let mut pipe = redis::pipe();
            pipe.atomic()
                .incr(&counter, 1)
                .ignore()
                .lpop(&counter, None)
                .ignore();
            let failed: redis::RedisResult<()> = pipe.query_async(&mut con).await;
            assert!(failed.is_err(), "LPOP on a number fails: {failed:?}");
            let total: i64 = con.get(&counter).await.unwrap();
            assert_eq!(total, 5050 + 1);
        }
    });
}

/// Tasks sharing one multiplexed connection, and the commands each sends.
const TASKS: usize = 16;
const ROUNDS: usize = 50;

#[test]
fn one_multiplexed_connection_cloned_into_tasks_on_every_shard() {
    require_peer!(Peer::Redis);
    let url = redis().url();
    on_each_backend(true, move |h, backend| {
        let url = url.clone();
        async move {
            let con = connect(&url).await;
            let counter = format!("eco:{}:shared-counter", tag(backend));
            let _: () = con.clone().del(&counter).await.unwrap();
            let mut jobs = Vec::new();
            for t in 0..TASKS {
                let mut con = con.clone();
                let (counter, prefix) = (counter.clone(), format!("eco:{}:t{t}", tag(backend)));
                let work = async move {
                    for r in 0..ROUNDS {
                        let key = format!("{prefix}:{r}");
                        let value = format!("{t}/{r}");
                        let () = con.set(&key, &value).await.unwrap();
                        let got: String = con.get(&key).await.unwrap();
                        assert_eq!(got, value, "a reply went to the wrong task");
                        let _: i64 = con.incr(&counter, 1).await.unwrap();
                    }
                    shard()
                };
                jobs.push(if t % 2 == 0 {
                    h.spawn_pinned((t / 2) % h.shard_count(), work).unwrap()
                } else {
                    h.spawn_stealable(work).unwrap()
                });
            }
            let mut shards = BTreeSet::new();
            for j in jobs {
                shards.insert(j.await.expect("a task"));
            }
            assert_eq!(shards, (0..h.shard_count()).collect(), "every shard");
            let total: usize = con.clone().get(&counter).await.unwrap();
            assert_eq!(total, TASKS * ROUNDS);
        }
    });
}

/// Messages published on the channel.
const MESSAGES: usize = 200;

#[test]
fn pubsub_delivers_to_a_stealable_task_in_order() {
    require_peer!(Peer::Redis);
    let url = redis().url();
    on_each_backend(true, move |h, backend| {
        let url = url.clone();
        async move {
            let channel = format!("eco:{}:news", tag(backend));
            let (subscribed, ready) = tokio::sync::oneshot::channel();
            let subscriber = {
                let (url, channel) = (url.clone(), channel.clone());
                h.spawn_stealable(async move {
                    let client = redis::Client::open(url.as_str()).unwrap();
                    let mut pubsub = client.get_async_pubsub().await.expect("pubsub");
                    pubsub.subscribe(&channel).await.expect("SUBSCRIBE");
                    subscribed.send(()).unwrap();
                    let mut messages = pubsub.on_message();
                    let mut got = Vec::new();
                    while got.len() < MESSAGES {
                        let msg = messages.next().await.expect("the stream ended");
                        assert_eq!(msg.get_channel_name(), channel);
                        got.push(msg.get_payload::<String>().unwrap());
                    }
                    got
                })
                .unwrap()
            };
            ready.await.expect("the subscriber subscribed");
            let publisher = {
                let channel = channel.clone();
                h.spawn_pinned(0, async move {
                    let mut con = connect(&url).await;
                    for i in 0..MESSAGES {
                        let receivers: usize =
                            con.publish(&channel, format!("news {i}")).await.unwrap();
                        assert_eq!(receivers, 1, "one subscriber");
                    }
                })
                .unwrap()
            };
            publisher.await.unwrap();
            let got = subscriber.await.expect("the subscriber");
            let want: Vec<String> = (0..MESSAGES).map(|i| format!("news {i}")).collect();
            assert_eq!(got, want, "every message, in order");
        }
    });
}

#[test]
fn the_runtime_drops_cleanly_after_redis() {
    require_peer!(Peer::Redis);
    let url = redis().url();
    on_each_backend_then_no_threads_left(true, move |h, backend| {
        let url = url.clone();
        async move {
            // A multiplexed connection with a blocking command in flight
            // and a subscriber waiting, left to the runtime's shutdown.
            let mut con = connect(&url).await;
            let () = con
                .set(format!("eco:{}:drop", tag(backend)), 1)
                .await
                .unwrap();
            let blocked = format!("eco:{}:never", tag(backend));
            h.spawn_pinned(1, async move {
                let _: redis::RedisResult<Option<(String, String)>> =
                    con.blpop(&blocked, 0.0).await;
            })
            .unwrap();
            let client = redis::Client::open(url.as_str()).unwrap();
            let mut pubsub = client.get_async_pubsub().await.expect("pubsub");
            pubsub.subscribe("eco:drop").await.unwrap();
            h.spawn_stealable(async move {
                let _ = pubsub.on_message().next().await;
            })
            .unwrap();
        }
    });
}
